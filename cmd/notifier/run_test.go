package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/procs"
	"github.com/walletsaga/walletsaga/internal/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

func TestDefaultsMatchTheDevStack(t *testing.T) {
	t.Parallel()
	cfg, _, err := parseConfig("notifier", nil, func(string) string { return "" }, &bytes.Buffer{}, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8081", cfg.HTTPAddr)
	require.Equal(t, "wallet-notifier", cfg.ConsumerGroup)
	require.Equal(t, "wallet-events", cfg.Topic)
	require.Equal(t, notify.DefaultRetryPolicy, cfg.Retry, "the production retry policy: 1 s to 5 min, 8 attempts and 15 min before a dead letter")
	require.Equal(t, 256, cfg.Workers)
	require.Equal(t, "first", cfg.ConsumeFrom)
	require.Nil(t, cfg.FailPhone, "no SMS fails on purpose unless configured")
	require.Zero(t, cfg.FailAmount, "no SMS fails on purpose unless configured")
	require.Empty(t, cfg.ReadToken, "no read token: the read API answers 403 until one is set")
	require.Equal(t, DevRocketMQUser, cfg.RocketMQAccessKey, "signs as the dev stack's notifier user")
	require.Equal(t, DevRocketMQSecret, cfg.RocketMQSecretKey, "with its documented dev secret")
	for env, field := range map[string]string{
		"READ_TOKEN": "short", "ADMIN_TOKEN": "short",
		"SMS_RETRY_MAX": "1ms", "SMS_WORKERS": "0", "CONSUME_FROM": "middle", "LANE_LEASE": "2s",
		"SMS_BREAKER_OPEN_MAX": "10ms", "SMS_DEAD_LETTER_AFTER": "-1s", "CONSUME_BUFFER": "1",
		"ROCKETMQ_SECRET_KEY_FILE": "/nonexistent/secret",
	} {
		_, _, err := parseConfig("notifier", nil, func(k string) string { return map[string]string{env: field}[k] }, &bytes.Buffer{}, nil)
		require.ErrorContains(t, err, env, "%s=%s is refused, naming the setting", env, field)
	}
	_, _, err = parseConfig("notifier", nil, func(k string) string {
		return map[string]string{"ROCKETMQ_ACCESS_KEY": "notifier-prod"}[k]
	}, &bytes.Buffer{}, nil)
	require.ErrorContains(t, err, "ROCKETMQ_SECRET_KEY", "another user never gets the dev secret")
	err = run(context.Background(), nil, func(k string) string {
		return map[string]string{"CONSUMER_GROUP": "bad group!"}[k]
	}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "CONSUMER_GROUP")
}

func TestRunAnswersProbesAndStopsGracefully(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	_, dbURL := testdb.New(t)
	// A topic and group of the test's own: with the defaults it would join the real
	// notifier's group on a machine running the demo, and consume its messages.
	topic, group := rmqtest.Unique("run-events"), rmqtest.Unique("run-notifier")
	b.CreateTopic(t, topic, 8)
	b.CreateTopic(t, ordering.DLQTopic(group), 1)
	p := procs.StartFuncTest(t, "notifier", run, nil, map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "CONSUMER_GROUP": group,
		// The admin user: the notifier user may use only the real topic and group.
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	})
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
	} {
		require.Contains(t, string(metricsText), name)
	}
	resp, err = http.Post(p.URL+"/v1/gate/1/skip", "application/json", strings.NewReader(`{"seq":1,"reason":"x"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no ADMIN_TOKEN: operator actions are off")
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
	err = run(context.Background(), []string{"sms-log", "--user", "42"}, func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL}[k]
	}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	require.Contains(t, out.String(), "You topped up 1.00 CNY. Balance: 1.00 CNY.")
	require.Contains(t, out.String(), "dead")
	require.Less(t, strings.Index(out.String(), "1.00 CNY"), strings.Index(out.String(), "4.04 CNY"), "in seq order")

	err = run(context.Background(), []string{"sms-log"}, func(string) string { return "" }, &out, &errOut)
	require.ErrorContains(t, err, "--user")
}
