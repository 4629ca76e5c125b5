package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/notify"
)

// config is the notifier's whole configuration, parsed once from flags and environment.
type config struct {
	DatabaseURL     string
	Namesrv         string
	Topic           string
	ConsumerGroup   string
	Instance        string
	HTTPAddr        string
	MigrateOnStart  bool
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration

	Sender         string // log | webhook
	WebhookURL     string
	SendTimeout    time.Duration
	FailPhone      *regexp.Regexp
	FailAmount     int64
	MaxAttempts    int
	RetryBase      time.Duration
	SuspendDelay   time.Duration
	ParkAfter      time.Duration
	HandlerTimeout time.Duration
	AdminToken     string
	Reconcile      bool

	failPhone      string
	failAmount     int
	adminTokenFile string
}

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer, extra func(*flag.FlagSet)) (config, []string, error) {
	var c config
	f := cli.NewFlags(name, getenv, stderr)
	f.String(&c.DatabaseURL, "DATABASE_URL", "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable", "PostgreSQL URL")
	f.String(&c.Namesrv, "ROCKETMQ_NAMESRV", "127.0.0.1:9876", "RocketMQ name server addresses, comma-separated")
	f.String(&c.Topic, "WALLET_EVENTS_TOPIC", "wallet-events", "topic of balance events")
	f.String(&c.ConsumerGroup, "CONSUMER_GROUP", "wallet-notifier", "RocketMQ consumer group")
	f.String(&c.Instance, "CONSUMER_INSTANCE", "", "this replica's name in the consumer group, stable across its restarts and unique among live replicas (a StatefulSet pod name, a compose service): a restarted notifier then takes its queues back at once instead of waiting up to 60 s for the broker to expire the old locks (empty: a new name per process)")
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8081", "address of the SMS log API and page")
	f.Bool(&c.MigrateOnStart, "MIGRATE_ON_START", true, "apply database migrations at start")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	f.String(&c.Sender, "SMS_SENDER", "log", "SMS sender: log (SMS log table + stdout) or webhook")
	f.String(&c.WebhookURL, "SMS_WEBHOOK_URL", "", "URL the webhook sender POSTs to")
	f.Duration(&c.SendTimeout, "SMS_TIMEOUT", notify.DefaultWebhookTimeout, "timeout of one webhook call")
	f.String(&c.failPhone, "SMS_FAIL_PHONE_PATTERN", notify.DefaultFailPhonePattern, `SMS to phones matching this regexp always fail ("off" disables)`)
	f.Int(&c.failAmount, "SMS_FAIL_AMOUNT", notify.DefaultFailAmount, "SMS for events of this amount (minor units, either sign) always fail (0 disables)")
	f.Int(&c.MaxAttempts, "SMS_MAX_ATTEMPTS", 3, "attempts per SMS before it is dead-lettered")
	f.Duration(&c.RetryBase, "SMS_RETRY_BASE", 200*time.Millisecond, "first backoff after a failed attempt (doubles, capped at 5s)")
	f.Duration(&c.SuspendDelay, "QUEUE_SUSPEND", time.Second, "default pause of a queue on retry")
	f.Duration(&c.ParkAfter, "PARK_AFTER", time.Second, "how long a message waits for a missing predecessor before it is parked in Postgres and its queue moves on")
	f.Duration(&c.HandlerTimeout, "HANDLER_TIMEOUT", 30*time.Second, "bound on handling one message")
	f.Secret(&c.AdminToken, "ADMIN_TOKEN", "bearer token of the operator endpoints (empty: they are disabled)")
	f.String(&c.adminTokenFile, "ADMIN_TOKEN_FILE", "", "file holding ADMIN_TOKEN (for secrets mounted as files)")
	f.Bool(&c.Reconcile, "DLQ_RECONCILE", true, "read the dead-letter queue and record what the gate did not")
	if extra != nil {
		extra(f.FlagSet())
	}
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	var err error
	if c.AdminToken, err = cli.ReadSecret("ADMIN_TOKEN_FILE", c.AdminToken, c.adminTokenFile); err != nil {
		return c, nil, err
	}
	re, err := notify.ParsePhonePattern(c.failPhone)
	if err != nil {
		return c, nil, fmt.Errorf("SMS_FAIL_PHONE_PATTERN: %w", err)
	}
	c.FailPhone, c.FailAmount = re, int64(c.failAmount)
	return c, f.FlagSet().Args(), c.validate()
}

func (c config) validate() error {
	var p cli.Problems
	p.CheckPostgresURL("DATABASE_URL", c.DatabaseURL)
	p.CheckHostPort("ROCKETMQ_NAMESRV", c.Namesrv, true)
	p.CheckName("WALLET_EVENTS_TOPIC", c.Topic)
	p.CheckName("CONSUMER_GROUP", c.ConsumerGroup)
	if c.Instance != "" {
		p.CheckName("CONSUMER_INSTANCE", c.Instance)
	}
	p.CheckHostPort("HTTP_ADDR", c.HTTPAddr, false)
	if c.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	switch c.Sender {
	case "log":
	case "webhook":
		if !strings.HasPrefix(c.WebhookURL, "http://") && !strings.HasPrefix(c.WebhookURL, "https://") {
			p.Addf("SMS_WEBHOOK_URL", "must be an http(s) URL when SMS_SENDER=webhook, got %q", c.WebhookURL)
		}
	default:
		p.Addf("SMS_SENDER", "must be log or webhook, got %q", c.Sender)
	}
	if c.SendTimeout <= 0 {
		p.Addf("SMS_TIMEOUT", "must be positive, got %s", c.SendTimeout)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		p.Addf("SMS_MAX_ATTEMPTS", "must be 1–100, got %d", c.MaxAttempts)
	}
	if c.RetryBase <= 0 {
		p.Addf("SMS_RETRY_BASE", "must be positive, got %s", c.RetryBase)
	}
	if c.ParkAfter <= 0 {
		p.Addf("PARK_AFTER", "must be positive, got %s", c.ParkAfter)
	}
	if c.SuspendDelay <= 0 {
		p.Addf("QUEUE_SUSPEND", "must be positive, got %s", c.SuspendDelay)
	}
	if c.HandlerTimeout <= c.SendTimeout {
		p.Addf("HANDLER_TIMEOUT", "must be longer than SMS_TIMEOUT (%s), got %s", c.SendTimeout, c.HandlerTimeout)
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		p.Addf("ADMIN_TOKEN", "must be at least 16 characters when set")
	}
	return p.Err()
}
