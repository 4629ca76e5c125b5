package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/providersim"
)

// config is providersim's whole configuration, parsed once from flags and environment.
type config struct {
	// Env must be "dev": the simulator approves any payment source.
	Env             string
	HTTPAddr        string
	AddrFile        string
	DatabaseURL     string // empty: the memory store
	Latency         time.Duration
	FailureRate     float64
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
	// Token is the bearer token every call must carry.
	Token string
	// URL is the running simulator the outage subcommand talks to.
	URL string

	failureRate string
	tokenFile   string
}

// devEnv is the only WALLETSAGA_ENV the simulator runs in.
const devEnv = "dev"

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	f := cli.NewFlags(name, getenv, stderr)
	f.String(&c.Env, "WALLETSAGA_ENV", "", "the environment; the simulator starts only in dev (it approves any payment source)")
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8082", "address of the provider API")
	f.String(&c.AddrFile, "HTTP_ADDR_FILE", "", "file the address HTTP_ADDR bound is written to once it listens, for whoever started the process with port 0 (empty: none)")
	f.String(&c.DatabaseURL, "DATABASE_URL", "", "PostgreSQL URL of the simulator's store, in its own schema providersim (empty: in memory, gone at exit)")
	f.Duration(&c.Latency, "SIM_LATENCY", 0, "latency added to every call")
	f.String(&c.failureRate, "SIM_FAILURE_RATE", "0", "share (0–1) of calls that fail retryably, half before the work and half after it (the answer lost)")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	f.Secret(&c.Token, "PROVIDER_TOKEN", "bearer token every call must carry (default: the dev token "+providersim.DevToken+")")
	f.String(&c.tokenFile, "PROVIDER_TOKEN_FILE", "", "file holding PROVIDER_TOKEN (for secrets mounted as files)")
	f.String(&c.URL, "PROVIDERSIM_URL", "http://127.0.0.1:8082", "the running simulator that `providersim outage` switches")
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	var err error
	if c.Token, err = cli.ReadSecret("PROVIDER_TOKEN_FILE", c.Token, c.tokenFile); err != nil {
		return c, nil, err
	}
	if c.Token == "" {
		c.Token = providersim.DevToken
	}
	if c.FailureRate, err = strconv.ParseFloat(c.failureRate, 64); err != nil {
		return c, nil, fmt.Errorf("SIM_FAILURE_RATE: %q is not a number", c.failureRate)
	}
	return c, f.FlagSet().Args(), c.validate()
}

func (c config) validate() error {
	var p cli.Problems
	p.CheckHostPort("HTTP_ADDR", c.HTTPAddr, false)
	if c.DatabaseURL != "" {
		p.CheckPostgresURL("DATABASE_URL", c.DatabaseURL)
	}
	if c.FailureRate < 0 || c.FailureRate > 1 {
		p.Addf("SIM_FAILURE_RATE", "must be between 0 and 1, got %v", c.FailureRate)
	}
	if c.Latency < 0 {
		p.Addf("SIM_LATENCY", "must not be negative, got %s", c.Latency)
	}
	if c.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	if len(c.Token) < 16 {
		p.Addf("PROVIDER_TOKEN", "must be at least 16 characters")
	}
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.Addf("PROVIDERSIM_URL", "must be an http(s) URL with a host, got %q", c.URL)
	}
	return p.Err()
}
