package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/procs"
	"github.com/walletsaga/walletsaga/internal/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

func TestConfigValidationNamesTheField(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"bad url":        {map[string]string{"DATABASE_URL": "mysql://x"}, "DATABASE_URL"},
		"bad namesrv":    {map[string]string{"ROCKETMQ_NAMESRV": "nohost"}, "ROCKETMQ_NAMESRV"},
		"bad topic":      {map[string]string{"WALLET_EVENTS_TOPIC": "a b"}, "WALLET_EVENTS_TOPIC"},
		"bad addr":       {map[string]string{"HTTP_ADDR": "8080"}, "HTTP_ADDR"},
		"bad bool":       {map[string]string{"MIGRATE_ON_START": "perhaps"}, "MIGRATE_ON_START"},
		"bad duration":   {map[string]string{"SHUTDOWN_TIMEOUT": "soon"}, "SHUTDOWN_TIMEOUT"},
		"workers range":  {map[string]string{"SAGA_WORKERS": "0"}, "SAGA_WORKERS"},
		"bad log format": {map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		"short service":  {map[string]string{"SERVICE_TOKEN": "short"}, "SERVICE_TOKEN"},
		"short admin":    {map[string]string{"ADMIN_TOKEN": "short"}, "ADMIN_TOKEN"},
		"same tokens":    {map[string]string{"ADMIN_TOKEN": "same-token-for-both", "SERVICE_TOKEN": "same-token-for-both"}, "ADMIN_TOKEN"},
		"bad queue hash": {map[string]string{"QUEUE_HASH": "crc32"}, "QUEUE_HASH"},
		"missing file":   {map[string]string{"SERVICE_TOKEN_FILE": "/nonexistent/token"}, "SERVICE_TOKEN_FILE"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(context.Background(), nil, func(k string) string { return tc.env[k] }, &out, &out)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	err := run(context.Background(), []string{"frobnicate"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `unknown command "frobnicate"`)
}

func TestDefaultsMatchTheDevStack(t *testing.T) {
	t.Parallel()
	cfg, _, err := parseConfig("walletsvc", nil, func(string) string { return "" }, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, "127.0.0.1:9876", cfg.Namesrv)
	require.Equal(t, "wallet-events", cfg.Topic)
	require.Contains(t, cfg.DatabaseURL, "127.0.0.1:55432/walletsaga")
	cfg, _, err = parseConfig("walletsvc", []string{"-HTTP_ADDR", "127.0.0.1:9999"}, func(k string) string {
		return map[string]string{"HTTP_ADDR": "127.0.0.1:7777"}[k]
	}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9999", cfg.HTTPAddr, "a flag overrides the environment")
	require.Equal(t, DevServiceToken, cfg.ServiceToken, "the documented dev default")
	require.Equal(t, "java", cfg.QueueHash, "users go where a Java producer of the topic puts them")
	require.Empty(t, cfg.AdminToken, "operator endpoints are off unless configured")
}

func TestTokensComeFromEnvOrFilesAndAreNeverShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "admin")
	require.NoError(t, os.WriteFile(file, []byte("admin-token-from-a-file\n"), 0o600))
	var help bytes.Buffer
	cfg, _, err := parseConfig("walletsvc", nil, func(k string) string {
		return map[string]string{"SERVICE_TOKEN": "service-token-from-env", "ADMIN_TOKEN_FILE": file}[k]
	}, &help)
	require.NoError(t, err)
	require.Equal(t, "service-token-from-env", cfg.ServiceToken)
	require.Equal(t, "admin-token-from-a-file", cfg.AdminToken)
	_, _, err = parseConfig("walletsvc", []string{"-h"}, func(k string) string {
		return map[string]string{"SERVICE_TOKEN": "service-token-from-env", "ADMIN_TOKEN": "admin-token-from-env-0"}[k]
	}, &help)
	require.Error(t, err)
	require.Contains(t, help.String(), "SERVICE_TOKEN")
	require.NotContains(t, help.String(), "service-token-from-env")
	require.NotContains(t, help.String(), "admin-token-from-env-0")
}

func TestServeMigratesAnswersProbesAndStopsGracefully(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	_, dbURL := testdb.New(t)
	// A topic and producer group of the test's own, never the real ones.
	topic, group := rmqtest.Unique("run-events"), rmqtest.Unique("run-relay")
	b.CreateTopic(t, topic, 8)
	p := procs.StartFuncTest(t, "walletsvc", run, []string{"serve"}, map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "PRODUCER_GROUP": group,
	})
	require.Contains(t, p.Output(), "topic="+topic)

	resp, err := http.Get(p.URL + "/readyz")
	require.NoError(t, err)
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%+v", body)
	require.Equal(t, map[string]string{"postgres": "ok", "rocketmq": "ok"}, body.Checks)

	resp, err = http.Get(p.URL + "/v1/sagas")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the wallet API needs the service token")
	req, err := http.NewRequest(http.MethodGet, p.URL+"/v1/sagas", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+DevServiceToken)
	resp, err = http.DefaultClient.Do(req)
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
		"walletsaga_outbox_unpublished 0", "walletsaga_outbox_oldest_unpublished_age_seconds 0",
		"walletsaga_relay_send_duration_seconds_bucket", "walletsaga_relay_active", "process_cpu_seconds_total",
	} {
		require.Contains(t, string(metricsText), name)
	}
	// Once the relay leads and has read the topic's route, each of its 8 queues is listed.
	waitUntil(t, 30*time.Second, "the relay's queues in /metrics", func() bool {
		resp, err := http.Get(p.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(text), `walletsaga_relay_queue_state{queue="broker-a/7",state="idle"} 1`) &&
			strings.Contains(string(text), `walletsaga_relay_queue_lag_seconds{queue="broker-a/0"} 0`)
	})

	resp, err = http.Get(p.URL + "/no/such/route")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "application/json", strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	resp.Body.Close()

	require.NoError(t, p.Stop(30*time.Second))
	require.Contains(t, p.Output(), "walletsvc stopped")
	require.Contains(t, p.Output(), "SERVICE_TOKEN is the documented dev default", "a warning while the dev token is in use")
	require.NotContains(t, p.Output(), DevServiceToken, "the token itself is never logged")
}

func TestReadyzFailsWhenTheBrokerIsUnreachable(t *testing.T) {
	t.Parallel()
	_, dbURL := testdb.New(t)
	p := procs.StartFuncTest(t, "walletsvc", run, nil, map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": hangUp(t),
		"WALLET_EVENTS_TOPIC": rmqtest.Unique("run-events"), "PRODUCER_GROUP": rmqtest.Unique("run-relay"),
	})
	resp, err := http.Get(p.URL + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "ok", body.Checks["postgres"])
	require.NotEqual(t, "ok", body.Checks["rocketmq"])
}

func TestMigrateSubcommandIsIdempotentAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	// Reset to an empty schema, then let three "replicas" migrate at once.
	_, err := pool.Exec(context.Background(), "DROP SCHEMA public CASCADE; DROP SCHEMA notify CASCADE; CREATE SCHEMA public")
	require.NoError(t, err)
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			errs <- run(context.Background(), []string{"migrate"}, func(k string) string {
				return map[string]string{"DATABASE_URL": dbURL}[k]
			}, &bytes.Buffer{}, &bytes.Buffer{})
		}()
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, <-errs)
	}
	var applied int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM goose_db_version WHERE version_id > 0").Scan(&applied))
	var files int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0").Scan(&files))
	require.Equal(t, files, applied, "each migration applied exactly once")
}

// walletsvc sim-outage switches a simulator's outage on in the shared database, and refuses
// what it cannot do with a message.
func TestSimOutageSubcommand(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	env := func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] }
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"sim-outage", "gateway", "timeout", "90s"}, env, &out, &bytes.Buffer{}))
	require.Contains(t, out.String(), "simulated gateway outage (timeout) for 1m30s")
	var mode string
	var left float64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT mode, extract(epoch FROM until - now()) FROM sim_outages WHERE target = 'gateway'`).Scan(&mode, &left))
	require.Equal(t, "timeout", mode)
	require.InDelta(t, 90, left, 30)

	require.ErrorContains(t, run(context.Background(), []string{"sim-outage", "gateway"}, env, &out, &bytes.Buffer{}), "usage: walletsvc sim-outage")
	require.ErrorContains(t, run(context.Background(), []string{"sim-outage", "bank", "fail", "1s"}, env, &out, &bytes.Buffer{}), "outage target must be")
	require.ErrorContains(t, run(context.Background(), []string{"sim-outage", "merchant", "fail", "soon"}, env, &out, &bytes.Buffer{}), `duration "soon"`)
}

// hangUp returns the address of a server that is no name server: it accepts connections and
// closes them at once. The test holds its port until it ends.
func hangUp(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}
