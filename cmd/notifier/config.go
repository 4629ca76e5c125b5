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
	AddrFile        string
	MigrateOnStart  bool
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration

	Sender          string // log | webhook
	WebhookURL      string
	SendTimeout     time.Duration
	FailPhone       *regexp.Regexp
	FailAmount      int64
	Workers         int
	Retry           notify.RetryPolicy
	BreakerFailures int
	BreakerOpen     time.Duration
	BreakerOpenMax  time.Duration
	LaneLease       time.Duration
	LanePoll        time.Duration
	ConsumeFrom     string // first | last
	ConsumeBatch    int
	ConsumeBuffer   int
	GapAlertAfter   time.Duration
	SuspendDelay    time.Duration
	HandlerTimeout  time.Duration
	AdminToken      string
	ReadToken       string
	Reconcile       bool
	// RocketMQAccessKey and RocketMQSecretKey are the RocketMQ user this process signs its
	// requests as (the broker's access control).
	RocketMQAccessKey string
	RocketMQSecretKey string

	failPhone      string
	failAmount     int
	adminTokenFile string
	readTokenFile  string

	rocketMQSecretKeyFile string
}

// DevRocketMQUser and DevRocketMQSecret are ROCKETMQ_ACCESS_KEY's documented default and
// its secret: the notifier user, allowed to consume wallet-events as wallet-notifier and to publish to its DLQ only, as scripts/services.sh creates it on the dev broker. A warning is logged
// at start while the dev secret is in use.
const (
	DevRocketMQUser   = "notifier"
	DevRocketMQSecret = "walletsaga-dev-notifier-secret" //nolint:gosec // G101: the documented dev secret, not a secret
)

func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer, extra func(*flag.FlagSet)) (config, []string, error) {
	var c config
	f := cli.NewFlags(name, getenv, stderr)
	f.String(&c.DatabaseURL, "DATABASE_URL", "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable", "PostgreSQL URL")
	f.String(&c.Namesrv, "ROCKETMQ_NAMESRV", "127.0.0.1:9876", "RocketMQ name server addresses, comma-separated")
	f.String(&c.Topic, "WALLET_EVENTS_TOPIC", "wallet-events", "topic of balance events")
	f.String(&c.ConsumerGroup, "CONSUMER_GROUP", "wallet-notifier", "RocketMQ consumer group")
	f.String(&c.Instance, "CONSUMER_INSTANCE", "", "this replica's name in the consumer group, stable across its restarts and unique among live replicas (a StatefulSet pod name, a compose service): a restarted notifier then takes its queues back at once instead of waiting up to 60 s for the broker to expire the old locks (empty: a new name per process)")
	f.String(&c.HTTPAddr, "HTTP_ADDR", "127.0.0.1:8081", "address of the SMS log API and page")
	f.String(&c.AddrFile, "HTTP_ADDR_FILE", "", "file the address HTTP_ADDR bound is written to once it listens, for whoever started the process with port 0 (empty: none)")
	f.Bool(&c.MigrateOnStart, "MIGRATE_ON_START", true, "apply database migrations at start")
	f.String(&c.LogFormat, "LOG_FORMAT", "text", "log format: text or json")
	f.String(&c.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&c.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	f.String(&c.Sender, "SMS_SENDER", "log", "SMS sender: log (SMS log table + stdout) or webhook")
	f.String(&c.WebhookURL, "SMS_WEBHOOK_URL", "", "URL the webhook sender POSTs to")
	f.Duration(&c.SendTimeout, "SMS_TIMEOUT", notify.DefaultWebhookTimeout, "timeout of one webhook call")
	f.String(&c.failPhone, "SMS_FAIL_PHONE_PATTERN", "off", `for demos and tests: SMS to phones matching this regexp always fail (off, the default, disables; the demo uses 0000$)`)
	f.Int(&c.failAmount, "SMS_FAIL_AMOUNT", 0, "for demos and tests: SMS for events of this amount (minor units, either sign) always fail (0, the default, disables; the demo uses 404)")
	f.Int(&c.Workers, "SMS_WORKERS", notify.DefaultWorkers, "delivery workers: how many users are sent to at once (each user's SMS go one after the other, in order)")
	dp := notify.DefaultRetryPolicy
	f.Duration(&c.Retry.Base, "SMS_RETRY_BASE", dp.Base, "wait after an SMS's first failed attempt; doubles with each further failure (with jitter)")
	f.Duration(&c.Retry.Max, "SMS_RETRY_MAX", dp.Max, "longest wait between two attempts of one SMS")
	f.Int(&c.Retry.MaxAttempts, "SMS_MAX_ATTEMPTS", dp.MaxAttempts, "attempts an SMS gets before it may be dead-lettered (SMS_DEAD_LETTER_AFTER must have passed too)")
	f.Duration(&c.Retry.DeadLetterAfter, "SMS_DEAD_LETTER_AFTER", dp.DeadLetterAfter, "time since an SMS's first attempt before it may be dead-lettered (SMS_MAX_ATTEMPTS must be spent too); a 4xx other than 408/409/429 dead-letters at once")
	f.Int(&c.BreakerFailures, "SMS_BREAKER_FAILURES", 5, "provider-wide failures in a row (5xx, timeouts, refused connections), each for a different user, that open the provider breaker")
	f.Duration(&c.BreakerOpen, "SMS_BREAKER_OPEN", time.Second, "how long the open breaker holds SMS back before a probe; doubles after each failed probe")
	f.Duration(&c.BreakerOpenMax, "SMS_BREAKER_OPEN_MAX", 3*time.Second, "longest pause of the open breaker between probes")
	f.Duration(&c.LaneLease, "LANE_LEASE", 30*time.Second, "how long a delivery worker holds a user without recording anything; a notifier that dies leaves its users to the others after that (one restarted under the same CONSUMER_INSTANCE takes them back at once)")
	f.Duration(&c.LanePoll, "LANE_POLL", 500*time.Millisecond, "how often idle workers look for due SMS (retries coming due, SMS another replica received)")
	f.String(&c.ConsumeFrom, "CONSUME_FROM", "first", "where a NEW consumer group starts: first (every message the topic still holds) or last (only what is published from now; a user first seen at seq n > 1 starts at n, recorded as a baseline in GET /v1/gate)")
	f.Int(&c.ConsumeBatch, "CONSUME_BATCH", 32, "messages of one queue written to the inbox in one transaction, at most")
	f.Int(&c.ConsumeBuffer, "CONSUME_BUFFER", 2048, "messages the consumer pulls ahead, across its queues (bounds memory while draining a backlog)")
	f.Duration(&c.GapAlertAfter, "GAP_ALERT_AFTER", 2*time.Minute, "a user whose next SMS has not arrived while later ones wait is listed as an alert in GET /v1/gate and /metrics after this long")
	f.Duration(&c.SuspendDelay, "QUEUE_SUSPEND", time.Second, "pause of a queue whose batch the database could not take")
	f.Duration(&c.HandlerTimeout, "HANDLER_TIMEOUT", 30*time.Second, "bound on writing one batch to the inbox")
	f.Secret(&c.AdminToken, "ADMIN_TOKEN", "bearer token of the operator endpoints (empty: they are disabled)")
	f.String(&c.adminTokenFile, "ADMIN_TOKEN_FILE", "", "file holding ADMIN_TOKEN (for secrets mounted as files)")
	f.Secret(&c.ReadToken, "READ_TOKEN", "bearer token of the read endpoints (SMS log, feed, dead letters, gate, audit; the page asks for it), which take ADMIN_TOKEN too (empty: only ADMIN_TOKEN; neither: they answer 403)")
	f.String(&c.readTokenFile, "READ_TOKEN_FILE", "", "file holding READ_TOKEN (for secrets mounted as files)")
	f.String(&c.RocketMQAccessKey, "ROCKETMQ_ACCESS_KEY", DevRocketMQUser, "RocketMQ user this process signs its requests as (the broker's access control)")
	f.Secret(&c.RocketMQSecretKey, "ROCKETMQ_SECRET_KEY", "secret key (password) of ROCKETMQ_ACCESS_KEY (default for the dev user: its dev secret)")
	f.String(&c.rocketMQSecretKeyFile, "ROCKETMQ_SECRET_KEY_FILE", "", "file holding ROCKETMQ_SECRET_KEY (for secrets mounted as files)")
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
	if c.ReadToken, err = cli.ReadSecret("READ_TOKEN_FILE", c.ReadToken, c.readTokenFile); err != nil {
		return c, nil, err
	}
	if c.RocketMQSecretKey, err = cli.ReadSecret("ROCKETMQ_SECRET_KEY_FILE", c.RocketMQSecretKey, c.rocketMQSecretKeyFile); err != nil {
		return c, nil, err
	}
	if c.RocketMQSecretKey == "" && c.RocketMQAccessKey == DevRocketMQUser {
		c.RocketMQSecretKey = DevRocketMQSecret
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
	if c.RocketMQAccessKey == "" {
		p.Addf("ROCKETMQ_ACCESS_KEY", "must be set")
	} else if c.RocketMQSecretKey == "" {
		p.Addf("ROCKETMQ_SECRET_KEY", "must be set for ROCKETMQ_ACCESS_KEY %q (or ROCKETMQ_SECRET_KEY_FILE)", c.RocketMQAccessKey)
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
	if c.Workers < 1 || c.Workers > 1024 {
		p.Addf("SMS_WORKERS", "must be 1–1024, got %d", c.Workers)
	}
	if c.Retry.MaxAttempts < 1 || c.Retry.MaxAttempts > 1000 {
		p.Addf("SMS_MAX_ATTEMPTS", "must be 1–1000, got %d", c.Retry.MaxAttempts)
	}
	if c.Retry.Base <= 0 {
		p.Addf("SMS_RETRY_BASE", "must be positive, got %s", c.Retry.Base)
	}
	if c.Retry.Max < c.Retry.Base {
		p.Addf("SMS_RETRY_MAX", "must be at least SMS_RETRY_BASE (%s), got %s", c.Retry.Base, c.Retry.Max)
	}
	if c.Retry.DeadLetterAfter < 0 {
		p.Addf("SMS_DEAD_LETTER_AFTER", "must not be negative, got %s", c.Retry.DeadLetterAfter)
	}
	if c.BreakerFailures < 1 {
		p.Addf("SMS_BREAKER_FAILURES", "must be at least 1, got %d", c.BreakerFailures)
	}
	if c.BreakerOpen <= 0 {
		p.Addf("SMS_BREAKER_OPEN", "must be positive, got %s", c.BreakerOpen)
	}
	if c.BreakerOpenMax < c.BreakerOpen {
		p.Addf("SMS_BREAKER_OPEN_MAX", "must be at least SMS_BREAKER_OPEN (%s), got %s", c.BreakerOpen, c.BreakerOpenMax)
	}
	if c.LaneLease < 2*c.SendTimeout+time.Second {
		p.Addf("LANE_LEASE", "must be at least twice SMS_TIMEOUT plus a second (%s), got %s", 2*c.SendTimeout+time.Second, c.LaneLease)
	}
	if c.LanePoll <= 0 {
		p.Addf("LANE_POLL", "must be positive, got %s", c.LanePoll)
	}
	if c.ConsumeFrom != "first" && c.ConsumeFrom != "last" {
		p.Addf("CONSUME_FROM", "must be first or last, got %q", c.ConsumeFrom)
	}
	if c.ConsumeBatch < 1 || c.ConsumeBatch > 1024 {
		p.Addf("CONSUME_BATCH", "must be 1–1024, got %d", c.ConsumeBatch)
	}
	if c.ConsumeBuffer < c.ConsumeBatch || c.ConsumeBuffer > 1000000 {
		p.Addf("CONSUME_BUFFER", "must be between CONSUME_BATCH (%d) and 1000000, got %d", c.ConsumeBatch, c.ConsumeBuffer)
	}
	if c.GapAlertAfter <= 0 {
		p.Addf("GAP_ALERT_AFTER", "must be positive, got %s", c.GapAlertAfter)
	}
	if c.SuspendDelay <= 0 {
		p.Addf("QUEUE_SUSPEND", "must be positive, got %s", c.SuspendDelay)
	}
	if c.HandlerTimeout <= 0 {
		p.Addf("HANDLER_TIMEOUT", "must be positive, got %s", c.HandlerTimeout)
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		p.Addf("ADMIN_TOKEN", "must be at least 16 characters when set")
	}
	if c.ReadToken != "" && len(c.ReadToken) < 16 {
		p.Addf("READ_TOKEN", "must be at least 16 characters when set")
	}
	return p.Err()
}
