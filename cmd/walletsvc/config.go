package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
)

// config is walletsvc's whole configuration, parsed once from flags and environment.
type config struct {
	DatabaseURL     string
	Namesrv         string
	Topic           string
	ProducerGroup   string
	HTTPAddr        string
	AddrFile        string
	MigrateOnStart  bool
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
	SagaWorkers     int
	SagaRetryWindow time.Duration
	RelayBatch      int
	RelayLockKey    int
	QueueHash       string
	SimLatency      time.Duration
	SimFailureRate  float64
	// ServiceToken is the bearer token the user-facing wallet API requires.
	ServiceToken string
	// AdminToken is the bearer token of the operator endpoints (empty: disabled).
	AdminToken string

	simFailureRate   string
	serviceTokenFile string
	adminTokenFile   string
}

// DevServiceToken is SERVICE_TOKEN's documented default, for the dev stack and the demo; a
// warning is logged at start while it is in use.
const DevServiceToken = "walletsaga-dev-service-token" //nolint:gosec // G101: the documented dev token, not a secret

// minTokenLen is the shortest token accepted.
const minTokenLen = 16

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	f := cli.NewFlags(name, getenv, stderr)
	f.String(&c.DatabaseURL, "DATABASE_URL", "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable", "PostgreSQL URL")
	f.String(&c.Namesrv, "ROCKETMQ_NAMESRV", "127.0.0.1:9876", "RocketMQ name server addresses, comma-separated")
	f.String(&c.Topic, "WALLET_EVENTS_TOPIC", "wallet-events", "topic of balance events")
	f.String(&c.ProducerGroup, "PRODUCER_GROUP", "wallet-relay", "RocketMQ producer group of the outbox relay")
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8080", "address of the REST API")
	f.String(&c.AddrFile, "HTTP_ADDR_FILE", "", "file the address HTTP_ADDR bound is written to once it listens, for whoever started the process with port 0 (empty: none)")
	f.Bool(&c.MigrateOnStart, "MIGRATE_ON_START", true, "apply database migrations at start")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	f.Int(&c.SagaWorkers, "SAGA_WORKERS", 16, "sagas recovered concurrently by this process (requests run their own sagas inline)")
	f.Duration(&c.SagaRetryWindow, "SAGA_RETRY_WINDOW", 10*time.Minute, "how long a saga step with an uncertain outcome is retried (same key) before it is compensated, and a compensation before an operator is needed")
	f.Int(&c.RelayBatch, "RELAY_BATCH", 256, "outbox rows the relay reads at a time for one broker queue")
	f.Int(&c.RelayLockKey, "RELAY_LOCK_KEY", 7421, "advisory lock that keeps one relay active per database")
	f.String(&c.QueueHash, "QUEUE_HASH", "java", "how a user id picks its broker queue: java (the Java client's SelectMessageQueueByHash, as a Java producer of the topic does) or fnv (the Go client's own hash selector)")
	f.Duration(&c.SimLatency, "SIM_LATENCY", 0, "latency of the built-in payment gateway and merchant simulators")
	f.String(&c.simFailureRate, "SIM_FAILURE_RATE", "0", "share (0–1) of simulator calls that fail retryably")
	f.Secret(&c.ServiceToken, "SERVICE_TOKEN", "bearer token of the wallet API's user-facing endpoints (default: the dev token "+DevServiceToken+")")
	f.String(&c.serviceTokenFile, "SERVICE_TOKEN_FILE", "", "file holding SERVICE_TOKEN (for secrets mounted as files)")
	f.Secret(&c.AdminToken, "ADMIN_TOKEN", "bearer token of the operator endpoints (empty: they are disabled)")
	f.String(&c.adminTokenFile, "ADMIN_TOKEN_FILE", "", "file holding ADMIN_TOKEN (for secrets mounted as files)")
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	var err error
	if c.ServiceToken, err = cli.ReadSecret("SERVICE_TOKEN_FILE", c.ServiceToken, c.serviceTokenFile); err != nil {
		return c, nil, err
	}
	if c.ServiceToken == "" {
		c.ServiceToken = DevServiceToken
	}
	if c.AdminToken, err = cli.ReadSecret("ADMIN_TOKEN_FILE", c.AdminToken, c.adminTokenFile); err != nil {
		return c, nil, err
	}
	var rate float64
	rate, err = strconv.ParseFloat(c.simFailureRate, 64)
	if err != nil {
		return c, nil, fmt.Errorf("SIM_FAILURE_RATE: %q is not a number", c.simFailureRate)
	}
	c.SimFailureRate = rate
	return c, f.FlagSet().Args(), c.validate()
}

func (c config) validate() error {
	var p cli.Problems
	p.CheckPostgresURL("DATABASE_URL", c.DatabaseURL)
	p.CheckHostPort("ROCKETMQ_NAMESRV", c.Namesrv, true)
	p.CheckName("WALLET_EVENTS_TOPIC", c.Topic)
	p.CheckName("PRODUCER_GROUP", c.ProducerGroup)
	p.CheckHostPort("HTTP_ADDR", c.HTTPAddr, false)
	if c.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.SagaWorkers < 1 || c.SagaWorkers > 1024 {
		p.Addf("SAGA_WORKERS", "must be 1–1024, got %d", c.SagaWorkers)
	}
	if c.SagaRetryWindow < time.Second {
		p.Addf("SAGA_RETRY_WINDOW", "must be at least 1s, got %s", c.SagaRetryWindow)
	}
	if c.SimFailureRate < 0 || c.SimFailureRate > 1 {
		p.Addf("SIM_FAILURE_RATE", "must be between 0 and 1, got %v", c.SimFailureRate)
	}
	if c.SimLatency < 0 {
		p.Addf("SIM_LATENCY", "must not be negative, got %s", c.SimLatency)
	}
	if c.RelayBatch < 1 || c.RelayBatch > 10000 {
		p.Addf("RELAY_BATCH", "must be 1–10000, got %d", c.RelayBatch)
	}
	if c.QueueHash != "java" && c.QueueHash != "fnv" {
		p.Addf("QUEUE_HASH", "must be java or fnv, got %q", c.QueueHash)
	}
	if len(c.ServiceToken) < minTokenLen {
		p.Addf("SERVICE_TOKEN", "must be at least %d characters", minTokenLen)
	}
	if c.AdminToken != "" && len(c.AdminToken) < minTokenLen {
		p.Addf("ADMIN_TOKEN", "must be at least %d characters when set", minTokenLen)
	}
	if c.AdminToken != "" && c.AdminToken == c.ServiceToken {
		p.Addf("ADMIN_TOKEN", "must differ from SERVICE_TOKEN")
	}
	return p.Err()
}
