package main

import (
	"io"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
)

// config is the notifier's whole configuration, parsed once from flags and environment.
type config struct {
	DatabaseURL     string
	Namesrv         string
	Topic           string
	ConsumerGroup   string
	HTTPAddr        string
	MigrateOnStart  bool
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
}

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	f := cli.NewFlags(name, getenv, stderr)
	f.String(&c.DatabaseURL, "DATABASE_URL", "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable", "PostgreSQL URL")
	f.String(&c.Namesrv, "ROCKETMQ_NAMESRV", "127.0.0.1:9876", "RocketMQ name server addresses, comma-separated")
	f.String(&c.Topic, "WALLET_EVENTS_TOPIC", "wallet-events", "topic of balance events")
	f.String(&c.ConsumerGroup, "CONSUMER_GROUP", "wallet-notifier", "RocketMQ consumer group")
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8081", "address of the SMS log API and page")
	f.Bool(&c.MigrateOnStart, "MIGRATE_ON_START", true, "apply database migrations at start")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	return c, f.FlagSet().Args(), c.validate()
}

func (c config) validate() error {
	var p cli.Problems
	p.CheckPostgresURL("DATABASE_URL", c.DatabaseURL)
	p.CheckHostPort("ROCKETMQ_NAMESRV", c.Namesrv, true)
	p.CheckName("WALLET_EVENTS_TOPIC", c.Topic)
	p.CheckName("CONSUMER_GROUP", c.ConsumerGroup)
	p.CheckHostPort("HTTP_ADDR", c.HTTPAddr, false)
	if c.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	return p.Err()
}
