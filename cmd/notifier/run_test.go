package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/scrape"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestDefaultsMatchTheDevStack(t *testing.T) {
	t.Parallel()
	cfg, err := binarytest.Config(parseConfig, "run", binarytest.DevEnv(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8081", cfg.HTTPAddr)
	require.Equal(t, "wallet-notifier", cfg.Group)
	require.Equal(t, "wallet-events", cfg.Topic)
	require.Equal(t, gate.DefaultRetryPolicy, cfg.Retry, "the production retry policy: 1 s to 5 min, 8 attempts and 15 min before a dead letter")
	require.Equal(t, 256, cfg.Workers)
	require.Equal(t, senders.DefaultBreakerConfig, senders.BreakerConfig{Failures: cfg.BreakerFailures, Open: cfg.BreakerOpen, OpenMax: cfg.BreakerOpenMax},
		"the breaker's settings default to the breaker's own defaults")
	require.Equal(t, "first", cfg.ConsumeFrom)
	require.Nil(t, cfg.FailPhone, "no SMS fails on purpose unless configured")
	require.Zero(t, cfg.FailAmount, "no SMS fails on purpose unless configured")
	require.Empty(t, cfg.ReadToken, "no read token: the read API answers 403 until one is set")
	require.Equal(t, spec.DevRocketMQUser, cfg.RocketMQAccessKey, "signs as the dev stack's notifier user")
	require.Equal(t, "walletsaga-dev-"+spec.DevRocketMQUser+"-secret", cfg.RocketMQSecretKey, "with its documented dev secret")
	for env, field := range map[string]string{
		"READ_TOKEN": "short", "ADMIN_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc", "OPERATOR_TOKENS": "carol:sha256:abc",
		"SMS_RETRY_MAX": "1ms", "SMS_WORKERS": "0", "CONSUME_FROM": "middle", "LANE_LEASE": "2s",
		"SMS_BREAKER_OPEN_MAX": "10ms", "SMS_DEAD_LETTER_AFTER": "-1s", "CONSUME_BUFFER": "1", "CONSUME_PULL_WAIT": "2s",
		"ROCKETMQ_SECRET_KEY_FILE": "/nonexistent/secret",
	} {
		_, err := binarytest.Config(parseConfig, "run", binarytest.DevEnv(map[string]string{env: field}))
		require.ErrorContains(t, err, env, "%s=%s is refused, naming the setting", env, field)
	}
	_, err = binarytest.Config(parseConfig, "notifier", map[string]string{"ROCKETMQ_ACCESS_KEY": "notifier-prod"})
	require.ErrorContains(t, err, "ROCKETMQ_SECRET_KEY", "another user never gets the dev secret")
	err = run(context.Background(), nil, func(k string) string {
		return binarytest.DevEnv(map[string]string{"CONSUMER_GROUP": "bad group!"})[k]
	}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "CONSUMER_GROUP")
}

// TestConfigReference holds docs/CONFIGURATION.md's notifier section to the flags notifier
// defines (go test ./cmd/... -run ConfigReference -update rewrites it).
func TestConfigReference(t *testing.T) {
	t.Parallel()
	binarytest.RequireConfigReference(t, "notifier", "run", parseConfig)
}

func TestRunAnswersProbesAndStopsGracefully(t *testing.T) {
	t.Parallel()
	b, topic, group := ownTopic(t, "run", 8)
	_, dbURL := testdb.New(t)
	p := procs.StartFuncTest(t, "notifier", run, nil, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		// The admin user: the notifier user may use only the real topic and group.
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	require.Contains(t, p.Output(), "group="+group)
	resp, err := http.Get(p.URL + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(p.URL + "/metrics")
	require.NoError(t, err)
	metricsText, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, name := range []string{
		`walletsaga_notify_deliveries_total{outcome="sent"} 0`, `walletsaga_notify_deliveries_total{outcome="dead_lettered"} 0`,
		`walletsaga_notify_inbox_messages_total{result="received"} 0`, "walletsaga_notify_breaker_state 0",
		"walletsaga_notify_inbox_pending 0", "walletsaga_notify_gap_alerts 0", "walletsaga_notify_dlq_unpublished 0",
		"walletsaga_sms_send_duration_seconds_bucket", "walletsaga_dlq_depth 0",
		"walletsaga_notify_commit_to_sms_seconds_count 0",
		`walletsaga_groupcommit_groups_total{writer="inbox"} 0`, `walletsaga_groupcommit_groups_total{writer="lane_records"} 0`,
		"walletsaga_notify_inbox_writes_total 0", "walletsaga_notify_record_statements_total 0",
		`walletsaga_build_info{goversion="` + runtime.Version() + `"`,
	} {
		require.Contains(t, string(metricsText), name)
	}
	resp, err = http.Post(p.URL+"/v1/gate/1/skip", "application/json", strings.NewReader(`{"seq":1,"reason":"x"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no OPERATOR_TOKENS: operator actions are off")
	require.NoError(t, p.Stop(30*time.Second))
	require.Contains(t, p.Output(), "notifier stopped")
}

func TestSMSLogCommand(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO notify.notifications (user_id, seq, status, attempts, kind, text, finished_at)
		VALUES (42, 1, 'sent', 1, 'deposit', 'You topped up 1.00 CNY. Balance: 1.00 CNY.', now()),
		       (42, 2, 'dead_lettered', 3, 'deposit', 'You topped up 4.04 CNY. Balance: 5.04 CNY.', now())`)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	// Production mode: sms-log needs only the database (whose dev password production takes
	// from a passfile only: a URL may not hold it).
	dbURL = testdb.WithPassfile(t, dbURL)
	err = run(context.Background(), []string{"sms-log", "--user", "42"}, func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL}[k]
	}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	require.Contains(t, out.String(), "You topped up 1.00 CNY. Balance: 1.00 CNY.")
	require.Contains(t, out.String(), "dead")
	require.Less(t, strings.Index(out.String(), "1.00 CNY"), strings.Index(out.String(), "4.04 CNY"), "in seq order")

	err = run(context.Background(), []string{"sms-log"}, func(k string) string { return binarytest.DevEnv(nil)[k] }, &out, &errOut)
	require.ErrorContains(t, err, "--user")
}

// Production is the default, and it refuses to start on anything unsafe, naming every
// problem at once.
func TestProductionRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	binarytest.RequireRefused(t, run, map[string]binarytest.Refusal{
		"nothing set": {Want: []string{"DATABASE_URL: required", "ROCKETMQ_NAMESRV: required", "SMS_WEBHOOK_URL: required",
			"SMS_WEBHOOK_TOKEN: required", "WALLETSAGA_ENV=dev"}},
		"the log sender":                  {Env: map[string]string{"SMS_SENDER": "log"}, Want: []string{"SMS_SENDER: log sends nothing"}},
		"failure switches":                {Env: map[string]string{"SMS_FAIL_PHONE_PATTERN": "0000$", "SMS_FAIL_AMOUNT": "404"}, Want: []string{"SMS_FAIL_PHONE_PATTERN: makes SMS fail on purpose", "SMS_FAIL_AMOUNT: makes SMS fail on purpose"}},
		"plain http to a remote provider": {Env: map[string]string{"SMS_WEBHOOK_URL": "http://sms.example.com/send"}, Want: []string{"SMS_WEBHOOK_URL: must be https"}},
		"dev tokens":                      {Env: map[string]string{"READ_TOKEN": "walletsaga-demo-read-token", "SMS_WEBHOOK_TOKEN": "walletsaga-dev-sms-token"}, Want: []string{"READ_TOKEN: is a secret the repository documents", "SMS_WEBHOOK_TOKEN: is a secret the repository documents"}},
		"predictable tokens":              {Env: map[string]string{"READ_TOKEN": "aaaaaaaaaaaaaaaaaaaa", "SMS_WEBHOOK_TOKEN": "1234567890123456"}, Want: []string{"READ_TOKEN: is too predictable", "SMS_WEBHOOK_TOKEN: is too predictable"}},
		"one token to read and to act": {Env: map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry("carol", "Qm8vT2xLp4ZrW9sY3nBc"), "READ_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc"},
			Want: []string{"OPERATOR_TOKENS: carol's token must differ from READ_TOKEN"}},
		"the demo's read token to act": {Env: map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry("carol", "Walletsaga-Demo-Read-Token")},
			Want: []string{"OPERATOR_TOKENS: carol's token is a secret the repository documents"}},
		"the shared admin token": {Env: map[string]string{"ADMIN_TOKEN_FILE": "/run/secrets/admin"}, Want: []string{"ADMIN_TOKEN_FILE: is no longer read", "OPERATOR_TOKENS_FILE"}},
		"the webhook's token as the broker's secret": {Env: map[string]string{"ROCKETMQ_ACCESS_KEY": "notifier-prod", "ROCKETMQ_SECRET_KEY": "Fz7kR2mXw9LqP4tV8cNb",
			"SMS_WEBHOOK_TOKEN": "Fz7kR2mXw9LqP4tV8cNb"}, Want: []string{"ROCKETMQ_SECRET_KEY: must differ from SMS_WEBHOOK_TOKEN"}},
		"no broker credentials":                {Want: []string{"ROCKETMQ_ACCESS_KEY: required in production", "ALLOW_UNSIGNED_BROKER"}},
		"unsigned broker without a reason":     {Env: map[string]string{"ALLOW_UNSIGNED_BROKER": "true"}, Want: []string{"ALLOW_UNSIGNED_BROKER: must state the reason in words"}},
		"a remote database in plain text":      {Env: map[string]string{"DATABASE_URL": "postgres://notifier@db.internal:5432/notify?sslmode=disable"}, Want: []string{"NOTIFY_DATABASE_URL: reaches db.internal over the network, so production needs sslmode=verify-full"}},
		"a remote database, server unverified": {Env: map[string]string{"DATABASE_URL": "postgres://notifier@db.internal:5432/notify?sslmode=require"}, Want: []string{"NOTIFY_DATABASE_URL: reaches db.internal over the network with sslmode=require", "production needs sslmode=verify-full", "set ALLOW_UNVERIFIED_DATABASE_TLS to the reason"}},
		"a needless unverified TLS override": {Env: map[string]string{"NOTIFY_DATABASE_URL": "postgres://notifier@db.internal:5432/notify?sslmode=verify-full", "ALLOW_UNVERIFIED_DATABASE_TLS": "the CA is not deployed yet"},
			Want: []string{"ALLOW_UNVERIFIED_DATABASE_TLS: is set, but NOTIFY_DATABASE_URL verifies its server (sslmode=verify-full): leave it unset"}},
		"a database password as a flag":         {Args: []string{"--notify-database-url", "postgres://notifier:a-secret-given-on-the-command-line@db.internal/notify?sslmode=verify-full"}, Want: []string{"NOTIFY_DATABASE_URL: a URL holding a password is not accepted on the command line"}},
		"a database URL file that is not there": {Env: map[string]string{"NOTIFY_DATABASE_URL_FILE": "/nonexistent/url"}, Want: []string{"NOTIFY_DATABASE_URL_FILE: open /nonexistent/url"}},
		"a secret as a flag":                    {Args: []string{"--read-token", "a-secret-given-on-the-command-line"}, Want: []string{"READ_TOKEN: secrets are not accepted on the command line"}},
	})
}

// One start in production with many things wrong at once: the one error lists every one of
// them, each naming its setting, and none of the secrets.
func TestProductionListsEveryProblemInOneMessage(t *testing.T) {
	t.Parallel()
	const shared = "Qm8vT2xLp4ZrW9sY3nBc"
	env := map[string]string{
		"ROCKETMQ_NAMESRV": "10.0.0.7:9876", "SMS_WEBHOOK_URL": "https://sms.example/send",
		"READ_TOKEN": shared, "SMS_WEBHOOK_TOKEN": shared, // one secret for two purposes
		"OPERATOR_TOKENS":     httpx.OperatorEntry("carol", "change-me-at-least-16"),          // the README's old example
		"ROCKETMQ_ACCESS_KEY": "notifier-prod", "ROCKETMQ_SECRET_KEY": "aaaaaaaaaaaaaaaaaaaa", // predictable
		"ALLOW_UNSIGNED_BROKER": "private network, only our hosts", // while signing
	}
	args := []string{"--notify-database-url", "postgres://notifier:a-db-password-of-ours@db.internal:5432/notify"}
	binarytest.RequireOneMessage(t, run, env, args, []string{
		"NOTIFY_DATABASE_URL: a URL holding a password is not accepted on the command line",
		"NOTIFY_DATABASE_URL: reaches db.internal over the network",
		"OPERATOR_TOKENS: carol's token is a secret the repository documents",
		"SMS_WEBHOOK_TOKEN: must differ from READ_TOKEN",
		"ALLOW_UNSIGNED_BROKER: is set, but ROCKETMQ_ACCESS_KEY signs the requests",
		"ROCKETMQ_SECRET_KEY: is too predictable",
		"METRICS_TOKEN: required",
	}, []string{shared, "a-db-password-of-ours", "aaaaaaaaaaaaaaaaaaaa", "change-me-at-least-16"})
}

// With ALLOW_UNVERIFIED_DATABASE_TLS stating why, production takes a remote database
// reached with sslmode=require, and says at start, whatever the subcommand, that the
// server is not verified.
func TestProductionWarnsOfAnUnverifiedDatabaseServer(t *testing.T) {
	t.Parallel()
	binarytest.RequireUnverifiedDatabaseWarned(t, run, "migrate", "NOTIFY_DATABASE_URL")
}

// Help exits 0 and lists the commands, and --version prints the build, both in production
// with nothing set.
func TestHelpAndVersionNeedNoSettings(t *testing.T) {
	t.Parallel()
	binarytest.RequireHelpAndVersion(t, run, "notifier", "--help", "Usage: notifier [command] [flags]", "run", "sms-log", "--notify-database-url", "SMS_WEBHOOK_TOKEN")
}

// The notifier starts while the broker cannot be reached: it serves its read API, stays ready
// (saying it does not consume), delivers what its inbox already holds, and starts consuming
// as soon as the broker can be reached.
func TestStartsWithoutTheBrokerAndConsumesOnceItIsBack(t *testing.T) {
	t.Parallel()
	b, topic, group := ownTopic(t, "nobroker", 4)
	pool, dbURL := testdb.New(t)

	// What an earlier run consumed and did not deliver yet: user 7's first SMS.
	ctx := context.Background()
	_, err := gate.NewStore(pool).Arrive(ctx, pool, []gate.Arrival{decoded(t, notifytest.Event(7, 1, walletevent.Deposit, 1000))}, nil)
	require.NoError(t, err)

	namesrv := newDoor(t, b.Namesrv) // closed: every connection is refused until it opens
	const readToken = "read-token-0123456789"
	p := procs.StartFuncTest(t, "notifier", run, nil, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": namesrv.addr, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		"READ_TOKEN": readToken,
		// The admin user: the notifier user may use only the real topic and group.
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	var ready struct {
		Status   string            `json:"status"`
		Checks   map[string]string `json:"checks"`
		Degraded []string          `json:"degraded"`
	}
	getJSON(t, p.URL+"/readyz", "", http.StatusOK, &ready)
	require.Equal(t, "ok", ready.Checks["postgres"])
	require.NotEqual(t, "ok", ready.Checks["consumer"], "it does not consume yet")
	require.NotEmpty(t, ready.Degraded)

	sms := func() []string {
		var log struct {
			Items []struct {
				Seq    int64  `json:"seq"`
				Status string `json:"status"`
			} `json:"items"`
		}
		getJSON(t, p.URL+"/v1/users/7/sms", readToken, http.StatusOK, &log)
		var out []string
		for _, it := range log.Items {
			out = append(out, fmt.Sprintf("%d:%s", it.Seq, it.Status))
		}
		return out
	}
	wait.Until(t, 30*time.Second, "the inbox to drain and the read API to serve while the broker is away",
		func() bool { return slices.Equal(sms(), []string{"1:sent"}) })
	require.Contains(t, scrape.Text(t, p.URL), "walletsaga_notify_consumer_running 0")

	namesrv.open()
	producer, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("nobroker-producer"), Credentials: b.Credentials})
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Shutdown() })
	body, err := walletevent.Encode(notifytest.Event(7, 2, walletevent.Deposit, 2000))
	require.NoError(t, err)
	_, err = producer.SendOrderly(ctx, ordering.Message{Topic: topic, ShardingKey: "7", Tag: "deposit", Body: body})
	require.NoError(t, err)
	wait.Until(t, 90*time.Second, "the consumer to start once the broker is reachable, and the next SMS to go out",
		func() bool { return slices.Equal(sms(), []string{"1:sent", "2:sent"}) })
	text := scrape.Text(t, p.URL)
	require.Contains(t, text, "walletsaga_notify_consumer_running 1")
	getJSON(t, p.URL+"/readyz", "", http.StatusOK, &ready)
	require.Equal(t, "ok", ready.Checks["consumer"])

	// The group-commit writers' counters: the inbox writer wrote the consumed message, the
	// lanes' recorder both SMS's outcomes (counted before they are answered, so already).
	for series, least := range map[string]float64{
		`walletsaga_groupcommit_groups_total{writer="inbox"}`:        1,
		`walletsaga_groupcommit_rows_total{writer="inbox"}`:          1,
		`walletsaga_groupcommit_groups_total{writer="lane_records"}`: 1,
		`walletsaga_groupcommit_rows_total{writer="lane_records"}`:   2,
		"walletsaga_notify_inbox_writes_total":                       1,
		"walletsaga_notify_record_statements_total":                  1,
	} {
		v, ok := scrape.Value(text, series)
		require.True(t, ok, "%s in /metrics", series)
		require.GreaterOrEqual(t, v, least, series)
	}
}

// decoded is ev as the inbox hands it to the gate.
func decoded(t *testing.T, ev walletevent.Event) gate.Arrival {
	t.Helper()
	body, err := walletevent.Encode(ev)
	require.NoError(t, err)
	d := inbox.Decode(inbox.Message{MsgID: fmt.Sprintf("test-%d-%d", ev.UserID, ev.Seq), Queue: "broker-a/0", Body: body})
	require.Empty(t, d.Bad)
	return d.Arrival
}

func getJSON(t *testing.T, url, token string, status int, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, status, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// door is a TCP forwarder to target that refuses every connection (closes it at once) until
// it is opened: a name server that cannot be reached, then can.
type door struct {
	addr   string
	target string
	isOpen atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func newDoor(t *testing.T, target string) *door {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &door{addr: ln.Addr().String(), target: target}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !g.isOpen.Load() {
				_ = c.Close()
				continue
			}
			wg.Go(func() { g.forward(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		// A client's idle connection would otherwise last until the name server drops it.
		g.mu.Lock()
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.mu.Unlock()
		wg.Wait()
	})
	return g
}

func (g *door) open() { g.isOpen.Store(true) }

// shut refuses every connection again, and cuts the ones open: the name server cannot be
// reached any more.
func (g *door) shut() {
	g.isOpen.Store(false)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.conns = nil
}

func (g *door) forward(c net.Conn) {
	defer c.Close() //nolint:errcheck // a test forwarder: nothing to do about a failed close
	up, err := net.Dial("tcp", g.target)
	if err != nil {
		return
	}
	defer up.Close() //nolint:errcheck // a test forwarder: nothing to do about a failed close
	g.mu.Lock()
	g.conns = append(g.conns, c, up)
	g.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// ownTopic returns the broker, and on it a topic of the test's own with queues queues and a
// consumer group of its own with its dead-letter topic, named after prefix: with the
// defaults a notifier would join the real notifier's group on a machine running the demo,
// and consume its messages.
func ownTopic(t *testing.T, prefix string, queues int) (rmqtest.Broker, string, string) {
	t.Helper()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique(prefix+"-events"), rmqtest.Unique(prefix+"-notifier")
	b.CreateTopic(t, topic, queues)
	b.CreateTopic(t, ordering.DLQTopic(group), 1)
	return b, topic, group
}
