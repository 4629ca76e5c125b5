package main

import (
	"io"
	"regexp"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/retention"
)

// config is the notifier's whole configuration, parsed once from flags and environment.
type config struct {
	cli.Service
	Instance string
	// MaxReadsInFlight bounds the read API's requests served at once (0: unbounded).
	MaxReadsInFlight int

	Sender          string // log | webhook
	WebhookURL      string
	WebhookToken    string
	SendTimeout     time.Duration
	FailPhone       *regexp.Regexp
	FailAmount      int64
	Workers         int
	Retry           gate.RetryPolicy
	BreakerFailures int
	BreakerOpen     time.Duration
	BreakerOpenMax  time.Duration
	LaneLease       time.Duration
	LanePoll        time.Duration
	ConsumeFrom     string // first | last
	ConsumeBatch    int
	ConsumeBuffer   int
	ConsumePullWait time.Duration
	GapAlertAfter   time.Duration
	SuspendDelay    time.Duration
	HandlerTimeout  time.Duration
	ReadToken       string
	Reconcile       bool
	// Retention windows (0: keep forever).
	RetentionInbox       time.Duration
	RetentionSMSLog      time.Duration
	RetentionWakes       time.Duration
	RetentionBadMessages time.Duration
	RetentionAudit       time.Duration

	// SMSLogUser and SMSLogFollow are sms-log's --user and --follow.
	SMSLogUser   int64
	SMSLogFollow bool

	failPhone  string
	failAmount int
}

// spec is the notifier's side of the settings the services share.
var spec = cli.ServiceSpec{
	Program: "notifier",
	Commands: [][2]string{
		{"run", "consume balance events and send each user's SMS in order (the default)"},
		{"migrate", "apply the notifier's database migrations (schema notify) and exit"},
		{"sms-log", "print one user's SMS log (--user N [--follow])"},
	},
	DatabaseEnv: "NOTIFY_DATABASE_URL", DatabaseFallback: "DATABASE_URL",
	DatabaseUsage: "PostgreSQL URL of the notifier's database (schema notify; it may be the wallet's database or one of its own, on any cluster); a cluster with a standby as all its nodes, with target_session_attrs=read-write",
	GroupEnv:      "CONSUMER_GROUP", GroupDefault: "wallet-notifier", GroupUsage: "RocketMQ consumer group",
	DevHTTPAddr: "127.0.0.1:8081", HTTPAddr: ":8081", HTTPUsage: "address of the SMS log API and page",
	DevRocketMQUser: "notifier", Unsigned: "consume",
}

// parseConfig reads the configuration of subcommand sub (run, sms-log).
func parseConfig(sub string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	f, err := c.Flags(spec, sub, getenv, stderr)
	if err != nil {
		return c, nil, err
	}
	serving := sub == "run"
	f.String(&c.Instance, "CONSUMER_INSTANCE", "", "this replica's name in the consumer group, stable across its restarts and unique among live replicas (a StatefulSet pod name, a compose service): a restarted notifier then takes its queues back at once instead of waiting up to 60 s for the broker to expire the old locks (empty: a new name per process)")
	f.String(&c.Sender, "SMS_SENDER", map[cli.Mode]string{cli.Dev: "log", cli.Production: "webhook"}[c.Mode], "SMS sender: webhook (POSTs each SMS to SMS_WEBHOOK_URL, the provider) or, in dev only, log (writes the SMS log table and stdout, sends nothing)")
	f.String(&c.WebhookURL, "SMS_WEBHOOK_URL", "", "URL the webhook sender POSTs to")
	f.Secret(&c.WebhookToken, "SMS_WEBHOOK_TOKEN", "", "bearer token the webhook sender presents to the SMS provider (required in production)")
	f.Duration(&c.SendTimeout, "SMS_TIMEOUT", senders.DefaultWebhookTimeout, "timeout of one webhook call")
	f.String(&c.failPhone, "SMS_FAIL_PHONE_PATTERN", "off", `dev only, for demos and tests: SMS to phones matching this regexp always fail (off, the default, disables; the demo uses 0000$)`)
	f.Int(&c.failAmount, "SMS_FAIL_AMOUNT", 0, "dev only, for demos and tests: SMS for events of this amount (minor units, either sign) always fail (0, the default, disables; the demo uses 404)")
	f.Int(&c.Workers, "SMS_WORKERS", gate.DefaultWorkers, "delivery workers: how many users are sent to at once (each user's SMS go one after the other, in order)")
	dp := gate.DefaultRetryPolicy
	f.Duration(&c.Retry.Base, "SMS_RETRY_BASE", dp.Base, "wait after an SMS's first failed attempt; doubles with each further failure (with jitter)")
	f.Duration(&c.Retry.Max, "SMS_RETRY_MAX", dp.Max, "longest wait between two attempts of one SMS")
	f.Int(&c.Retry.MaxAttempts, "SMS_MAX_ATTEMPTS", dp.MaxAttempts, "attempts an SMS gets before it may be dead-lettered (SMS_DEAD_LETTER_AFTER must have passed too)")
	f.Duration(&c.Retry.DeadLetterAfter, "SMS_DEAD_LETTER_AFTER", dp.DeadLetterAfter, "time since an SMS's first attempt before it may be dead-lettered (SMS_MAX_ATTEMPTS must be spent too); a 4xx other than 408/409/429 dead-letters at once")
	db := senders.DefaultBreakerConfig
	f.Int(&c.BreakerFailures, "SMS_BREAKER_FAILURES", db.Failures, "provider-wide failures in a row (5xx, timeouts, refused connections), each for a different user, that open the provider breaker")
	f.Duration(&c.BreakerOpen, "SMS_BREAKER_OPEN", db.Open, "how long the open breaker holds SMS back before a probe; doubles after each failed probe")
	f.Duration(&c.BreakerOpenMax, "SMS_BREAKER_OPEN_MAX", db.OpenMax, "longest pause of the open breaker between probes")
	f.Duration(&c.LaneLease, "LANE_LEASE", 30*time.Second, "how long a delivery worker holds a user without recording anything; a notifier that dies leaves its users to the others after that (one restarted under the same CONSUMER_INSTANCE takes them back at once)")
	f.Duration(&c.LanePoll, "LANE_POLL", 500*time.Millisecond, "how soon idle workers look for due SMS that nothing in this process woke them for (SMS another replica received or gave back); doubled after each look that finds nothing, up to ten times this")
	f.String(&c.ConsumeFrom, "CONSUME_FROM", "first", "where a NEW consumer group starts, once: its very first start (recorded in the notifier's database) begins the topic's queues at their first message (first: every message they still hold) or at their end (last: only what is published from then on; a user first seen at seq n > 1 in a queue's first batch starts at n, recorded as a baseline in GET /v1/gate). Every later start, of any replica, resumes where the group stopped, and reads a queue without an offset (one added to the topic since) from its first message, whatever this says")
	f.Int(&c.MaxReadsInFlight, "MAX_READS_IN_FLIGHT", 2, "requests of the read API (the SMS log, the gate, the lists) this replica serves at once; one past it is answered 503 with Retry-After (0: unbounded). Each is a database query of up to a page, so this bounds the connections and CPU the consoles and their scripts can take from delivery")
	f.Int(&c.ConsumeBatch, "CONSUME_BATCH", 32, "messages of one queue written to the inbox in one transaction, at most")
	f.Int(&c.ConsumeBuffer, "CONSUME_BUFFER", 2048, "messages the consumer pulls ahead, across its queues (bounds memory while draining a backlog)")
	f.Duration(&c.ConsumePullWait, "CONSUME_PULL_WAIT", 20*time.Millisecond, "how long a queue waits, after a pull that brought all it held, before it pulls again, so that at moderate rates several messages share a pull (a backlog is pulled without waiting, and a message arriving on an idle queue comes at once); 0 pulls again at once")
	f.Duration(&c.GapAlertAfter, "GAP_ALERT_AFTER", 2*time.Minute, "a user whose next SMS has not arrived while later ones wait is listed as an alert in GET /v1/gate and /metrics after this long")
	f.Duration(&c.SuspendDelay, "QUEUE_SUSPEND", time.Second, "pause of a queue whose batch the database could not take")
	f.Duration(&c.HandlerTimeout, "HANDLER_TIMEOUT", 30*time.Second, "bound on writing one batch to the inbox")
	f.Secret(&c.ReadToken, "READ_TOKEN", "", "bearer token of the read endpoints (SMS log, feed, dead letters, gate, audit; the page asks for it), which take the operators' tokens too (OPERATOR_TOKENS; empty: only theirs; neither: they answer 403)")
	f.Bool(&c.Reconcile, "DLQ_RECONCILE", true, "read the dead-letter queue and record what the gate did not")
	c.BindLate(f, spec)
	if sub == "sms-log" {
		f.FlagSet().Int64Var(&c.SMSLogUser, "user", 0, "user id whose SMS log to print (required)")
		f.FlagSet().BoolVar(&c.SMSLogFollow, "follow", false, "keep printing new SMS until interrupted")
	}
	f.Duration(&c.RetentionInbox, "RETENTION_INBOX", retention.DefaultInbox, "retention: how long a finished inbox row (sent, dead-lettered and published, skipped) is kept (0: forever; each user's position is never pruned)")
	f.Duration(&c.RetentionSMSLog, "RETENTION_SMS_LOG", retention.DefaultSMSLog, "retention: how long an SMS log row is kept (0: forever)")
	f.Duration(&c.RetentionWakes, "RETENTION_WAKES", retention.DefaultWakes, "retention: how long a wake row that wakes nobody any more is kept (0: forever)")
	f.Duration(&c.RetentionBadMessages, "RETENTION_BAD_MESSAGES", retention.DefaultBadMessages, "retention: how long a message that did not decode is kept once it is in the DLQ topic (0: forever; one not yet there is never pruned)")
	f.Duration(&c.RetentionAudit, "RETENTION_AUDIT", retention.DefaultAudit, "retention: how long an operator audit row (replay, skip) is kept (0: forever; never while its SMS is in the inbox)")
	f.RetentionFlags(&c.RetentionBatch, &c.RetentionPause)
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	p := f.Problems()
	re, err := senders.ParsePhonePattern(c.failPhone)
	if err != nil {
		p.Addf("SMS_FAIL_PHONE_PATTERN", "%v", err)
	}
	c.FailPhone, c.FailAmount = re, int64(c.failAmount)
	c.validate(p, serving)
	return c, f.FlagSet().Args(), f.Err()
}

// validate adds c's problems to p; what only delivery needs matters only when serving.
func (c config) validate(p *cli.Problems, serving bool) {
	c.CheckEarly(p, spec)
	if c.Instance != "" {
		p.CheckName("CONSUMER_INSTANCE", c.Instance)
	}
	if c.MaxReadsInFlight < 0 {
		p.Addf("MAX_READS_IN_FLIGHT", "must not be negative, got %d", c.MaxReadsInFlight)
	}
	switch c.Sender {
	case "log":
		if c.Mode == cli.Production && serving {
			p.Addf("SMS_SENDER", "log sends nothing (it writes the SMS log and stdout): it is a simulated provider, for dev only; production needs webhook")
		}
	case "webhook":
		if c.WebhookURL == "" && serving {
			p.Addf("SMS_WEBHOOK_URL", "required when SMS_SENDER=webhook")
		}
		p.CheckServiceURL(c.Mode, "SMS_WEBHOOK_URL", c.WebhookURL)
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
	if c.ConsumePullWait < 0 || c.ConsumePullWait > time.Second {
		p.Addf("CONSUME_PULL_WAIT", "must be 0–1s, got %s", c.ConsumePullWait)
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
	if c.Mode == cli.Production {
		if c.FailPhone != nil {
			p.Addf("SMS_FAIL_PHONE_PATTERN", "makes SMS fail on purpose: for demos and tests in dev only")
		}
		if c.FailAmount != 0 {
			p.Addf("SMS_FAIL_AMOUNT", "makes SMS fail on purpose: for demos and tests in dev only")
		}
	}
	p.CheckToken(c.Mode, "SMS_WEBHOOK_TOKEN", c.WebhookToken, serving && c.Mode == cli.Production && c.Sender == "webhook")
	p.CheckToken(c.Mode, "READ_TOKEN", c.ReadToken, false)
	// Every secret the notifier takes (from readers and operators) or presents (to the SMS
	// provider, the broker and the database) is another's; no two may be the same, nor an
	// operator's token.
	c.CheckLate(p, spec, serving,
		cli.NamedSecret{Field: "READ_TOKEN", Value: c.ReadToken},
		cli.NamedSecret{Field: "SMS_WEBHOOK_TOKEN", Value: c.WebhookToken},
	)
	p.CheckRetention(c.Mode, c.RetentionBatch, c.RetentionPause,
		map[string]time.Duration{"RETENTION_INBOX": c.RetentionInbox, "RETENTION_SMS_LOG": c.RetentionSMSLog, "RETENTION_WAKES": c.RetentionWakes,
			"RETENTION_BAD_MESSAGES": c.RetentionBadMessages, "RETENTION_AUDIT": c.RetentionAudit},
		map[string]retention.Bounds{"RETENTION_INBOX": retention.InboxBounds, "RETENTION_SMS_LOG": retention.InboxBounds, "RETENTION_WAKES": retention.WakeBounds,
			"RETENTION_BAD_MESSAGES": retention.InboxBounds, "RETENTION_AUDIT": retention.AuditBounds})
}
