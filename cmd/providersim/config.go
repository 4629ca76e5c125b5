package main

import (
	"io"
	"strconv"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/providersim"
)

// config is providersim's whole configuration, parsed once from flags and environment.
type config struct {
	// Mode must be dev: the simulator approves any payment source.
	Mode            cli.Mode
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
}

// commands are providersim's subcommands, for -h.
var commands = [][2]string{
	{"serve", "serve the payment gateway and merchant contract, simulated (the default; dev only)"},
	{"outage", "switch an outage of a running simulator: outage gateway|merchant fail|timeout DURATION"},
}

// parseConfig reads the configuration of subcommand sub (serve, outage) and refuses it with
// every problem named in one error: a WALLETSAGA_ENV that is no mode, the settings', and, to
// serve, a mode other than dev and arguments serve does not take.
func parseConfig(sub string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	// A WALLETSAGA_ENV that is neither mode is one problem among the others; the settings
	// are then read as production reads them, the strictest.
	mode, modeErr := cli.ModeFrom(getenv)
	if modeErr != nil {
		mode = cli.Production
	}
	c.Mode = mode
	f := cli.NewFlags("providersim "+sub, mode, getenv, stderr, commands...)
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8082", "address of the provider API")
	f.String(&c.AddrFile, "HTTP_ADDR_FILE", "", "file the address HTTP_ADDR bound is written to once it listens, for whoever started the process with port 0 (empty: none)")
	f.DatabaseURL(&c.DatabaseURL, "DATABASE_URL", "", "", false, "PostgreSQL URL of the simulator's store, in its own schema providersim (empty: in memory, gone at exit)")
	f.Duration(&c.Latency, "SIM_LATENCY", 0, "latency added to every call")
	f.String(&c.failureRate, "SIM_FAILURE_RATE", "0", "share (0–1) of calls that fail retryably, half before the work and half after it (the answer lost)")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	f.Secret(&c.Token, "PROVIDER_TOKEN", providersim.DevToken, "bearer token every call must carry")
	f.String(&c.URL, "PROVIDERSIM_URL", "http://127.0.0.1:8082", "the running simulator that `providersim outage` switches")
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	p := f.Problems()
	if modeErr != nil {
		*p = append(cli.Problems{modeErr.Error()}, *p...)
	}
	var err error
	if c.FailureRate, err = strconv.ParseFloat(c.failureRate, 64); err != nil {
		p.Addf("SIM_FAILURE_RATE", "%q is not a number", c.failureRate)
	}
	// An unknown mode is named once, above, rather than again as "not dev".
	c.validate(p, sub == "serve" && modeErr == nil)
	rest := f.FlagSet().Args()
	if sub == "serve" && len(rest) > 0 {
		p.Addf("arguments", "serve takes none, got %q", rest)
	}
	return c, rest, f.Err()
}

// validate adds c's problems to p; serving, the simulator runs only in dev.
func (c config) validate(p *cli.Problems, serving bool) {
	if serving && c.Mode != cli.Dev {
		p.Addf(cli.ModeEnv, "must be dev: the simulator approves any payment source, so it never serves in %s", c.Mode)
	}
	p.CheckHostPort("HTTP_ADDR", c.HTTPAddr, false)
	p.CheckPostgresURL(c.Mode, "DATABASE_URL", c.DatabaseURL, "")
	if c.FailureRate < 0 || c.FailureRate > 1 {
		p.Addf("SIM_FAILURE_RATE", "must be between 0 and 1, got %v", c.FailureRate)
	}
	if c.Latency < 0 {
		p.Addf("SIM_LATENCY", "must not be negative, got %s", c.Latency)
	}
	if c.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	p.CheckLog(c.LogFormat, c.LogLevel)
	p.CheckToken(c.Mode, "PROVIDER_TOKEN", c.Token, true)
	p.CheckDistinct(c.Mode,
		cli.NamedSecret{Field: "PROVIDER_TOKEN", Value: c.Token},
		cli.NamedSecret{Field: "DATABASE_URL's password", Value: cli.URLPassword(c.DatabaseURL)},
	)
	p.CheckServiceURL(cli.Dev, "PROVIDERSIM_URL", c.URL)
}
