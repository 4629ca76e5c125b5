package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/scrape"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestConfigValidationNamesTheField(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"bad url":                {map[string]string{"DATABASE_URL": "mysql://x"}, "DATABASE_URL"},
		"bad namesrv":            {map[string]string{"ROCKETMQ_NAMESRV": "nohost"}, "ROCKETMQ_NAMESRV"},
		"bad topic":              {map[string]string{"WALLET_EVENTS_TOPIC": "a b"}, "WALLET_EVENTS_TOPIC"},
		"bad addr":               {map[string]string{"HTTP_ADDR": "8080"}, "HTTP_ADDR"},
		"bad bool":               {map[string]string{"MIGRATE_ON_START": "perhaps"}, "MIGRATE_ON_START"},
		"bad duration":           {map[string]string{"SHUTDOWN_TIMEOUT": "soon"}, "SHUTDOWN_TIMEOUT"},
		"workers range":          {map[string]string{"SAGA_WORKERS": "0"}, "SAGA_WORKERS"},
		"bad log format":         {map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		"short service":          {map[string]string{"SERVICE_TOKEN": "short"}, "SERVICE_TOKEN"},
		"the shared admin token": {map[string]string{"ADMIN_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc"}, "ADMIN_TOKEN: is no longer read"},
		"its file":               {map[string]string{"ADMIN_TOKEN_FILE": "/run/secrets/admin"}, "ADMIN_TOKEN_FILE: is no longer read"},
		"same tokens": {map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry("alice", "same-token-for-both"), "SERVICE_TOKEN": "same-token-for-both"},
			"OPERATOR_TOKENS: alice's token must differ from SERVICE_TOKEN"},
		"an operator's token itself": {map[string]string{"OPERATOR_TOKENS": "alice:Qm8vT2xLp4ZrW9sY3nBc"}, "OPERATOR_TOKENS: line 1 (alice): the token is given as sha256:"},
		"no operator":                {map[string]string{"OPERATOR_TOKENS": " , "}, "OPERATOR_TOKENS: is set but lists no operator"},
		"operators twice": {map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry("alice", "a-token-of-alices"), "OPERATOR_TOKENS_FILE": "/run/operators"},
			"OPERATOR_TOKENS: is set, and so is OPERATOR_TOKENS_FILE"},
		"missing operators file": {map[string]string{"OPERATOR_TOKENS_FILE": "/nonexistent/operators"}, "OPERATOR_TOKENS_FILE: open /nonexistent/operators"},
		"missing file":           {map[string]string{"SERVICE_TOKEN_FILE": "/nonexistent/token"}, "SERVICE_TOKEN_FILE"},
		"user, no secret":        {map[string]string{"ROCKETMQ_ACCESS_KEY": "wallet-prod"}, "ROCKETMQ_SECRET_KEY"},
		"no secret file":         {map[string]string{"ROCKETMQ_SECRET_KEY_FILE": "/nonexistent/secret"}, "ROCKETMQ_SECRET_KEY_FILE"},
		"bad queue hash":         {map[string]string{"QUEUE_HASH": "crc32"}, "QUEUE_HASH"},
		"event version":          {map[string]string{"EVENT_VERSION": "3"}, "EVENT_VERSION: must be 1 or 2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			// A context already cancelled: a configuration that is wrongly accepted makes run
			// return at once (without an error, which fails the test) instead of serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := run(ctx, nil, func(k string) string { return binarytest.DevEnv(tc.env)[k] }, &out, &out)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	err := run(context.Background(), []string{"frobnicate"}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `unknown command "frobnicate"`)
}

func TestDefaultsMatchTheDevStack(t *testing.T) {
	t.Parallel()
	cfg, err := binarytest.Config(parseConfig, "serve", binarytest.DevEnv(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, "127.0.0.1:9876", cfg.Namesrv)
	require.Equal(t, "wallet-events", cfg.Topic)
	require.Contains(t, cfg.DatabaseURL, "127.0.0.1:55432/walletsaga")
	// The gateway and the merchant: the provider simulator, with its documented dev token.
	require.Equal(t, "http://127.0.0.1:8082", cfg.GatewayURL)
	require.Equal(t, "http://127.0.0.1:8082", cfg.MerchantURL)
	require.Equal(t, providersim.DevToken, cfg.GatewayToken, "the simulator's documented dev token")
	require.Equal(t, providersim.DevToken, cfg.MerchantToken)
	require.Equal(t, 10*time.Second, cfg.ProviderTimeout)
	cfg, err = binarytest.Config(parseConfig, "serve", binarytest.DevEnv(map[string]string{"HTTP_ADDR": "127.0.0.1:7777"}), "--http-addr", "127.0.0.1:9999")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9999", cfg.HTTPAddr, "a flag overrides the environment")
	require.Equal(t, DevServiceToken, cfg.ServiceToken, "the documented dev default")
	require.Equal(t, "java", cfg.QueueHash, "users go where a Java producer of the topic puts them")
	require.Equal(t, walletevent.Version, cfg.EventVersion, "balance events in the wallet's epoch, unless an upgrade asks for the previous release's")
	require.Zero(t, cfg.Operators.Len(), "operator endpoints are off unless configured")
	require.Equal(t, spec.DevRocketMQUser, cfg.RocketMQAccessKey, "signs as the dev stack's walletsvc user")
	require.Equal(t, "walletsaga-dev-"+spec.DevRocketMQUser+"-secret", cfg.RocketMQSecretKey, "with its documented dev secret")
}

// TestConfigReference holds docs/CONFIGURATION.md's walletsvc section to the flags walletsvc
// defines (go test ./cmd/... -run ConfigReference -update rewrites it).
func TestConfigReference(t *testing.T) {
	t.Parallel()
	binarytest.RequireConfigReference(t, "walletsvc", "serve", parseConfig)
}

func TestTokensComeFromEnvOrFilesAndAreNeverShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "operators")
	require.NoError(t, os.WriteFile(file, []byte("# walletsvc's operators\n"+httpx.OperatorEntry("alice", "alice-token-from-her-vault")+
		"\n"+httpx.OperatorEntry("bob", "bob-token-from-his-vault")+" # on call\n"), 0o600))
	var help bytes.Buffer
	cfg, _, err := parseConfig("serve", nil, func(k string) string {
		return binarytest.DevEnv(map[string]string{"SERVICE_TOKEN": "service-token-from-env", "OPERATOR_TOKENS_FILE": file})[k]
	}, &help)
	require.NoError(t, err)
	require.Equal(t, "service-token-from-env", cfg.ServiceToken)
	require.Equal(t, []string{"alice", "bob"}, cfg.Operators.Names())
	name, ok := cfg.Operators.Identify("bob-token-from-his-vault")
	require.True(t, ok)
	require.Equal(t, "bob", name)
	secret := filepath.Join(dir, "rocketmq")
	require.NoError(t, os.WriteFile(secret, []byte("rocketmq-secret-from-a-file\n"), 0o600))
	cfg, _, err = parseConfig("serve", nil, func(k string) string {
		return binarytest.DevEnv(map[string]string{"ROCKETMQ_ACCESS_KEY": "wallet-prod", "ROCKETMQ_SECRET_KEY_FILE": secret})[k]
	}, &help)
	require.NoError(t, err)
	require.Equal(t, "wallet-prod", cfg.RocketMQAccessKey)
	require.Equal(t, "rocketmq-secret-from-a-file", cfg.RocketMQSecretKey)
	_, _, err = parseConfig("serve", []string{"-h"}, func(k string) string {
		return binarytest.DevEnv(map[string]string{"SERVICE_TOKEN": "service-token-from-env", "METRICS_TOKEN": "metrics-token-from-env-0", "ROCKETMQ_SECRET_KEY": "rocketmq-secret-from-env"})[k]
	}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, help.String(), "SERVICE_TOKEN")
	require.Contains(t, help.String(), "ROCKETMQ_SECRET_KEY")
	require.NotContains(t, help.String(), "service-token-from-env")
	require.NotContains(t, help.String(), "metrics-token-from-env-0")
	require.NotContains(t, help.String(), "rocketmq-secret-from-env")
}

func TestServeMigratesAnswersProbesAndStopsGracefully(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	_, dbURL := testdb.New(t)
	// A topic and producer group of the test's own, never the real ones.
	topic, group := rmqtest.Unique("run-events"), rmqtest.Unique("run-relay")
	b.CreateTopic(t, topic, 8)
	// The gateway and the merchant: the simulator, reached over HTTP as a real provider is.
	prov := simtest.Start(t, nil, providersim.Options{})
	p := procs.StartFuncTest(t, "walletsvc", run, []string{"serve"}, binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.Namesrv, "WALLET_EVENTS_TOPIC": topic, "PRODUCER_GROUP": group,
		"PAYMENT_GATEWAY_URL": prov.URL, "MERCHANT_URL": prov.URL,
		// The admin user: the walletsvc user may publish only to the real topic.
		"ROCKETMQ_ACCESS_KEY": b.Credentials.AccessKey, "ROCKETMQ_SECRET_KEY": b.Credentials.SecretKey,
	}))
	require.Contains(t, p.Output(), "topic="+topic)
	require.Contains(t, p.Output(), "payment_gateway="+prov.URL)

	// Ready from the start (Postgres is enough); the broker's state comes from a watch
	// whose first check runs in the background, so poll until it has reported.
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	wait.Until(t, 10*time.Second, "readyz to report the broker", func() bool {
		resp, err := http.Get(p.URL + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%+v", body)
		return body.Checks["rocketmq"] == "ok"
	})
	require.Equal(t, map[string]string{"postgres": "ok", "rocketmq": "ok"}, body.Checks)

	resp, err := http.Get(p.URL + "/v1/sagas")
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
		`walletsaga_groupcommit_groups_total{writer="relay_marks"} 0`, `walletsaga_groupcommit_rows_total{writer="relay_marks"} 0`,
		`walletsaga_groupcommit_groups_total{writer="saga_commits"} 0`, `walletsaga_groupcommit_requests_total{writer="saga_commits"} 0`,
		`walletsaga_build_info{goversion="` + runtime.Version() + `"`,
	} {
		require.Contains(t, string(metricsText), name)
	}
	// Once the relay leads and has read the topic's route, each of its 8 queues is listed.
	wait.Until(t, 30*time.Second, "the relay's queues in /metrics", func() bool {
		resp, err := http.Get(p.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		text, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(text), `walletsaga_relay_queue_state{queue="broker-a/7",state="idle"} 1`) &&
			strings.Contains(string(text), `walletsaga_relay_queue_lag_seconds{queue="broker-a/0"} 0`)
	})

	// After the metrics of an empty outbox: a deposit charges the payment source at the gateway over HTTP; a declined one fails.
	call := func(path, body string) map[string]any {
		status, out := binarytest.Call(t, http.MethodPost, p.URL+path, DevServiceToken, body)
		require.Less(t, status, 300, "%s: %v", path, out)
		return out
	}
	user := call("/v1/users", `{"name":"Ann","phone":"+8613800138000"}`)
	// A user id is an integer up to 2^53 - 1: %v of the float64 JSON gives would print 1.2e+14.
	deposits := fmt.Sprintf("/v1/users/%d/deposits?wait=true", int64(user["id"].(float64)))
	require.Equal(t, "completed", call(deposits, `{"amount":500}`)["state"])
	require.Equal(t, "failed", call(deposits, `{"amount":500,"source":"`+providersim.DeclinedSource+`"}`)["state"])
	require.Equal(t, 1, prov.ChargesIn(t, providersim.ChargeCharged))
	require.Equal(t, 1, prov.ChargesIn(t, providersim.ChargeDeclined))
	// Each deposit's two saga commits are counted by the engine's shared commits: alone, one
	// after the other, each its own group.
	text := scrape.Text(t, p.URL)
	sagaGroups, _ := scrape.Value(text, `walletsaga_groupcommit_groups_total{writer="saga_commits"}`)
	sagaCommits, _ := scrape.Value(text, `walletsaga_groupcommit_requests_total{writer="saga_commits"}`)
	require.Equal(t, 4.0, sagaCommits, "two commits of each deposit")
	require.Equal(t, sagaCommits, sagaGroups, "sequential commits never wait for a group")
	// The completed deposit's balance event is published, and the relay's committer marks it:
	// its group-commit counters show the write.
	wait.Until(t, 30*time.Second, "the relay's marks in /metrics", func() bool {
		text := scrape.Text(t, p.URL)
		groups, _ := scrape.Value(text, `walletsaga_groupcommit_groups_total{writer="relay_marks"}`)
		requests, _ := scrape.Value(text, `walletsaga_groupcommit_requests_total{writer="relay_marks"}`)
		rows, _ := scrape.Value(text, `walletsaga_groupcommit_rows_total{writer="relay_marks"}`)
		return groups >= 1 && requests >= groups && rows >= 1
	})

	resp, err = http.Get(p.URL + "/no/such/route")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "application/json", strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	resp.Body.Close()

	require.NoError(t, p.Stop(30*time.Second))
	require.Contains(t, p.Output(), "walletsvc stopped")
	require.Contains(t, p.Output(), "running in dev mode", "a warning while dev settings are accepted")
	require.NotContains(t, p.Output(), DevServiceToken, "the token itself is never logged")
	require.NotContains(t, p.Output(), DevProviderToken)
}

// The broker being away is no reason to leave the load balancer: the outbox keeps the
// events. walletsvc stays ready, and says what it cannot do, in /readyz, /healthz and a metric.
func TestReadyWhileTheBrokerIsUnreachable(t *testing.T) {
	t.Parallel()
	p := startWithoutBroker(t, nil)
	for _, path := range []string{"/readyz", "/healthz"} {
		resp, err := http.Get(p.URL + path)
		require.NoError(t, err)
		var body struct {
			Status   string            `json:"status"`
			Checks   map[string]string `json:"checks"`
			Degraded []string          `json:"degraded"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "ok", body.Status, path)
		require.NotEqual(t, "ok", body.Checks["rocketmq"], path)
		require.Len(t, body.Degraded, 1, path)
		require.Contains(t, body.Degraded[0], "outbox", path)
		if path == "/readyz" {
			require.Equal(t, "ok", body.Checks["postgres"])
		}
	}
	resp, err := http.Get(p.URL + "/metrics")
	require.NoError(t, err)
	text, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(text), "walletsaga_broker_reachable 0")
}

// The remote parties' URLs are logged as redact.URL shows them: a user, a password or a
// parameter that carries a secret (where some providers take a key) never reaches the log;
// the rest of the URL does, so an operator can tell which provider it is.
func TestProviderURLsAreLoggedWithoutCredentials(t *testing.T) {
	t.Parallel()
	p := startWithoutBroker(t, map[string]string{
		"PAYMENT_GATEWAY_URL": "http://gw-user:gw-pass@127.0.0.1:1/gw?api_key=gw-key",
		"MERCHANT_URL":        "http://shop-user@127.0.0.1:2/shop?token=shop-key#frag",
	})
	out := p.Output()
	require.Contains(t, out, `payment_gateway="http://127.0.0.1:1/gw?api_key=xxxxx"`)
	require.Contains(t, out, `merchant="http://127.0.0.1:2/shop?token=xxxxx#frag"`)
	for _, secret := range []string{"gw-user", "gw-pass", "gw-key", "shop-user", "shop-key"} {
		require.NotContains(t, out, secret)
	}
}

// Production is the default, and it refuses to start on anything unsafe, naming every
// problem at once.
func TestProductionRefusesUnsafeSettings(t *testing.T) {
	t.Parallel()
	binarytest.RequireRefused(t, run, map[string]binarytest.Refusal{
		"nothing set": {Want: []string{"DATABASE_URL: required", "ROCKETMQ_NAMESRV: required", "SERVICE_TOKEN: required", "WALLETSAGA_ENV=dev"}},
		"short token": {Env: map[string]string{"SERVICE_TOKEN": "short"}, Want: []string{"SERVICE_TOKEN: must be at least 16"}},
		"dev token": {Env: map[string]string{"SERVICE_TOKEN": DevServiceToken, "OPERATOR_TOKENS": httpx.OperatorEntry("alice", "Walletsaga-Dev-Service-Token")},
			Want: []string{"SERVICE_TOKEN: is a secret the repository documents", "OPERATOR_TOKENS: alice's token is a secret the repository documents"}},
		"the README's old example": {Env: map[string]string{"OPERATOR_TOKENS": httpx.OperatorEntry("alice", "Qm8vT2xLp4ZrW9sY3nBc") + "," + httpx.OperatorEntry("bob", "CHANGE-ME-AT-LEAST-16")},
			Want: []string{"OPERATOR_TOKENS: bob's token is a secret the repository documents"}},
		"the shared admin token": {Env: map[string]string{"ADMIN_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc"}, Want: []string{"ADMIN_TOKEN: is no longer read", "OPERATOR_TOKENS_FILE"}},
		"predictable tokens":     {Env: map[string]string{"SERVICE_TOKEN": "aaaaaaaaaaaaaaaaaaaa", "MERCHANT_TOKEN": "1234567890123456"}, Want: []string{"SERVICE_TOKEN: is too predictable", "MERCHANT_TOKEN: is too predictable"}},
		"a secret for two purposes": {Env: map[string]string{"SERVICE_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc", "PAYMENT_GATEWAY_TOKEN": "Qm8vT2xLp4ZrW9sY3nBc",
			"MERCHANT_TOKEN": "Fz7kR2mXw9LqP4tV8cNb", "AUTH_JWT_HMAC_SECRET": "Fz7kR2mXw9LqP4tV8cNb", "OPERATOR_TOKENS": httpx.OperatorEntry("carol", "Fz7kR2mXw9LqP4tV8cNb")},
			Want: []string{"PAYMENT_GATEWAY_TOKEN: must differ from SERVICE_TOKEN", "MERCHANT_TOKEN: must differ from AUTH_JWT_HMAC_SECRET",
				"OPERATOR_TOKENS: carol's token must differ from AUTH_JWT_HMAC_SECRET", "OPERATOR_TOKENS: carol's token must differ from MERCHANT_TOKEN"}},
		"an operator's token as the metrics token": {Env: map[string]string{"METRICS_TOKEN": "Jd83kLq0Zp2mXv7RwT5yBn4cGh6sFa1e",
			"OPERATOR_TOKENS": httpx.OperatorEntry("alice", "Fz7kR2mXw9LqP4tV8cNb") + "\n" + httpx.OperatorEntry("dave", "Jd83kLq0Zp2mXv7RwT5yBn4cGh6sFa1e")},
			Want: []string{"OPERATOR_TOKENS: dave's token must differ from METRICS_TOKEN"}},
		"an HMAC secret that is a provider token": {Env: map[string]string{"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc",
			"AUTH_JWT_HMAC_SECRET": "Jd83kLq0Zp2mXv7RwT5yBn4cGh6sFa1e", "PAYMENT_GATEWAY_TOKEN": "Jd83kLq0Zp2mXv7RwT5yBn4cGh6sFa1e"}, Want: []string{"PAYMENT_GATEWAY_TOKEN: must differ from AUTH_JWT_HMAC_SECRET"}},
		"no broker credentials":                 {Want: []string{"ROCKETMQ_ACCESS_KEY: required in production", "ALLOW_UNSIGNED_BROKER"}},
		"unsigned broker without a reason":      {Env: map[string]string{"ALLOW_UNSIGNED_BROKER": "yes"}, Want: []string{"ALLOW_UNSIGNED_BROKER: must state the reason in words"}},
		"a documented broker secret":            {Env: map[string]string{"ROCKETMQ_ACCESS_KEY": spec.DevRocketMQUser, "ROCKETMQ_SECRET_KEY": cli.DevRocketMQSecret(spec.DevRocketMQUser)}, Want: []string{"ROCKETMQ_SECRET_KEY: is a secret the repository documents"}},
		"a remote database in plain text":       {Env: map[string]string{"DATABASE_URL": "postgres://wallet@db.internal:5432/wallet?sslmode=disable"}, Want: []string{"DATABASE_URL: reaches db.internal over the network, so production needs sslmode=verify-full"}},
		"a remote database, TLS if it pleases":  {Env: map[string]string{"DATABASE_URL": "postgres://wallet@db.internal:5432/wallet"}, Want: []string{"DATABASE_URL: reaches db.internal", "got no sslmode"}},
		"a remote database, server unverified":  {Env: map[string]string{"DATABASE_URL": "postgres://wallet@db.internal:5432/wallet?sslmode=require"}, Want: []string{"DATABASE_URL: reaches db.internal over the network with sslmode=require", "production needs sslmode=verify-full", "set ALLOW_UNVERIFIED_DATABASE_TLS to the reason"}},
		"a remote database, name unverified":    {Env: map[string]string{"DATABASE_URL": "postgres://wallet@db.internal:5432/wallet?sslmode=verify-ca&sslrootcert=/etc/ca.pem"}, Want: []string{"DATABASE_URL: reaches db.internal over the network with sslmode=verify-ca", "set ALLOW_UNVERIFIED_DATABASE_TLS to the reason"}},
		"unverified TLS without a reason":       {Env: map[string]string{"ALLOW_UNVERIFIED_DATABASE_TLS": "yes"}, Want: []string{"ALLOW_UNVERIFIED_DATABASE_TLS: must state the reason in words"}},
		"a database password as a flag":         {Args: []string{"--database-url", "postgres://wallet:a-secret-given-on-the-command-line@db.internal/wallet?sslmode=verify-full"}, Want: []string{"DATABASE_URL: a URL holding a password is not accepted on the command line"}},
		"the dev stack's database password":     {Env: map[string]string{"DATABASE_URL": cli.DevDatabaseURL}, Want: []string{"DATABASE_URL: holds a password the repository documents"}},
		"a database URL file that is not there": {Env: map[string]string{"DATABASE_URL_FILE": "/nonexistent/url"}, Want: []string{"DATABASE_URL_FILE: open /nonexistent/url"}},
		"secret as a flag":                      {Args: []string{"--service-token", "a-secret-given-on-the-command-line"}, Want: []string{"SERVICE_TOKEN: secrets are not accepted on the command line"}},
		"override without a reason":             {Env: map[string]string{"ALLOW_UNSAFE_DURABILITY": "yes"}, Want: []string{"ALLOW_UNSAFE_DURABILITY: must state the reason"}},
		"mode misspelt":                         {Env: map[string]string{"WALLETSAGA_ENV": "development"}, Want: []string{"WALLETSAGA_ENV"}},
		"no provider":                           {Want: []string{"PAYMENT_GATEWAY_URL: required", "MERCHANT_URL: required", "PAYMENT_GATEWAY_TOKEN: required", "MERCHANT_TOKEN: required"}},
		"the simulated providers": {Env: map[string]string{"PAYMENT_GATEWAY_URL": DevProviderURL, "MERCHANT_URL": "http://providersim:8082",
			"PAYMENT_GATEWAY_TOKEN": DevProviderToken, "MERCHANT_TOKEN": DevProviderToken}, Want: []string{"MERCHANT_URL: must be https", "PAYMENT_GATEWAY_TOKEN: is a secret the repository documents", "MERCHANT_TOKEN: is a secret the repository documents"}},
	})
}

// One start in production with many things wrong at once: the one error lists every one of
// them, each naming its setting, and none of the secrets.
func TestProductionListsEveryProblemInOneMessage(t *testing.T) {
	t.Parallel()
	const shared = "Qm8vT2xLp4ZrW9sY3nBc"
	env := map[string]string{
		"ROCKETMQ_NAMESRV":    "10.0.0.7:9876",
		"PAYMENT_GATEWAY_URL": "https://pay.example", "MERCHANT_URL": "https://shop.example",
		"SERVICE_TOKEN": shared, "MERCHANT_TOKEN": shared, // one secret for two purposes
		"OPERATOR_TOKENS":       httpx.OperatorEntry("alice", "change-me-at-least-16"), // the README's old example
		"PAYMENT_GATEWAY_TOKEN": "1234567890123456",                                    // predictable
		// and no ROCKETMQ_ACCESS_KEY, nor ALLOW_UNSIGNED_BROKER
	}
	args := []string{"--database-url", "postgres://wallet:a-db-password-of-ours@db.internal:5432/wallet?sslmode=prefer"}
	binarytest.RequireOneMessage(t, run, env, args, []string{
		"DATABASE_URL: a URL holding a password is not accepted on the command line",
		"DATABASE_URL: reaches db.internal over the network",
		"PAYMENT_GATEWAY_TOKEN: is too predictable",
		"OPERATOR_TOKENS: alice's token is a secret the repository documents",
		"MERCHANT_TOKEN: must differ from SERVICE_TOKEN",
		"ROCKETMQ_ACCESS_KEY: required in production",
		"METRICS_TOKEN: required",
	}, []string{shared, "a-db-password-of-ours", "1234567890123456", "change-me-at-least-16"})
}

// In production walletsvc checks, at start, that Postgres keeps what it acknowledges. The dev
// stack's Postgres runs with fsync and synchronous_commit off, so it is refused there unless
// an override states why.
func TestProductionRefusesADatabaseThatCanLoseCommits(t *testing.T) {
	t.Parallel()
	_, dbURL := testdb.New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var fsync, syncCommit string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &syncCommit))
	if fsync == "on" && syncCommit == "on" {
		t.Fatalf("the dev stack's Postgres is expected to run with fsync off (scripts/services.sh); got fsync=%s synchronous_commit=%s", fsync, syncCommit)
	}
	prov := simtest.Start(t, nil, providersim.Options{Token: "a-provider-token-of-our-own"})
	env := map[string]string{
		"DATABASE_URL": testdb.WithPassfile(t, dbURL), "ROCKETMQ_NAMESRV": binarytest.HangUp(t), "SERVICE_TOKEN": "a-production-token-of-our-own",
		"PAYMENT_GATEWAY_URL": prov.URL, "MERCHANT_URL": prov.URL,
		// The simulator takes one token; no merchant call is made here.
		"PAYMENT_GATEWAY_TOKEN": "a-provider-token-of-our-own", "MERCHANT_TOKEN": "a-merchant-token-of-our-own",
		"ALLOW_UNSIGNED_BROKER": "test name server on loopback, nothing listens behind it",
		"HTTP_ADDR":             "127.0.0.1:0", "WALLET_EVENTS_TOPIC": rmqtest.Unique("run-events"), "PRODUCER_GROUP": rmqtest.Unique("run-relay"),
		"METRICS_TOKEN": "a-metrics-token-of-our-own",
	}
	var out bytes.Buffer
	err = run(context.Background(), nil, func(k string) string { return env[k] }, &out, &out)
	require.ErrorContains(t, err, "refusing to start")
	require.ErrorContains(t, err, "fsync is off")
	require.ErrorContains(t, err, "ALLOW_UNSAFE_DURABILITY")

	env["ALLOW_UNSAFE_DURABILITY"] = "throwaway test cluster, nothing real in it"
	p := procs.StartFuncTest(t, "walletsvc", run, nil, env)
	require.Contains(t, p.Output(), "throwaway test cluster, nothing real in it", "the override is logged with its reason")
	require.Contains(t, p.Output(), "test name server on loopback, nothing listens behind it", "so is the unsigned broker's")
}

// With ALLOW_UNVERIFIED_DATABASE_TLS stating why, production takes a remote database
// reached with sslmode=require, and says at start, whatever the subcommand, that the
// server is not verified.
func TestProductionWarnsOfAnUnverifiedDatabaseServer(t *testing.T) {
	t.Parallel()
	binarytest.RequireUnverifiedDatabaseWarned(t, run, "migrate", "DATABASE_URL")
}

// Help exits 0 and lists the commands, and --version prints the build, both in production
// with nothing set.
func TestHelpAndVersionNeedNoSettings(t *testing.T) {
	t.Parallel()
	binarytest.RequireHelpAndVersion(t, run, "walletsvc", "-h", "Usage: walletsvc [command] [flags]", "serve", "migrate", "--database-url", "WALLETSAGA_ENV")
}

func TestMigrateSubcommandIsIdempotentAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	// Reset to an empty schema, then let three "replicas" migrate at once.
	_, err := pool.Exec(context.Background(), "DROP SCHEMA public CASCADE; DROP SCHEMA notify CASCADE; CREATE SCHEMA public")
	require.NoError(t, err)
	errs := make(chan error, 3)
	dbURL = testdb.WithPassfile(t, dbURL) // production refuses the dev stack's documented password in a URL
	for i := 0; i < 3; i++ {
		go func() {
			// Production mode: migrate needs only the database.
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

// The gateway's and the merchant's settings (their dev defaults are in
// TestDefaultsMatchTheDevStack): tokens come from the environment or files, are never shown,
// and are checked like the others.
func TestProviderSettings(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "merchant")
	require.NoError(t, os.WriteFile(file, []byte("merchant-token-from-a-file\n"), 0o600))
	var help bytes.Buffer
	cfg, _, err := parseConfig("serve", nil, func(k string) string {
		return binarytest.DevEnv(map[string]string{"PAYMENT_GATEWAY_URL": "https://pay.example", "PAYMENT_GATEWAY_TOKEN": "gateway-token-from-env",
			"MERCHANT_URL": "http://shop:9000", "MERCHANT_TOKEN_FILE": file, "PROVIDER_TIMEOUT": "3s"})[k]
	}, &help)
	require.NoError(t, err)
	require.Equal(t, "https://pay.example", cfg.GatewayURL)
	require.Equal(t, "gateway-token-from-env", cfg.GatewayToken)
	require.Equal(t, "merchant-token-from-a-file", cfg.MerchantToken)
	require.Equal(t, 3*time.Second, cfg.ProviderTimeout)
	_, _, err = parseConfig("serve", []string{"-h"}, func(k string) string {
		return binarytest.DevEnv(map[string]string{"PAYMENT_GATEWAY_TOKEN": "gateway-token-from-env"})[k]
	}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, help.String(), "PAYMENT_GATEWAY_TOKEN")
	require.NotContains(t, help.String(), "gateway-token-from-env")

	for env, want := range map[string]string{
		"PAYMENT_GATEWAY_URL":   "PAYMENT_GATEWAY_URL: must be an http(s) URL",
		"MERCHANT_URL":          "MERCHANT_URL: must be an http(s) URL",
		"PAYMENT_GATEWAY_TOKEN": "PAYMENT_GATEWAY_TOKEN: must be at least 16",
		"MERCHANT_TOKEN":        "MERCHANT_TOKEN: must be at least 16",
		"PROVIDER_TIMEOUT":      "PROVIDER_TIMEOUT: must be 100ms–5m",
	} {
		bad := map[string]string{"PAYMENT_GATEWAY_URL": "127.0.0.1:8082", "MERCHANT_URL": "ftp://shop", "PAYMENT_GATEWAY_TOKEN": "short",
			"MERCHANT_TOKEN": "short", "PROVIDER_TIMEOUT": "1ms"}[env]
		_, err := binarytest.Config(parseConfig, "serve", binarytest.DevEnv(map[string]string{env: bad}))
		require.ErrorContains(t, err, want)
	}
	_, err = binarytest.Config(parseConfig, "serve", binarytest.DevEnv(map[string]string{"MERCHANT_TOKEN_FILE": "/nonexistent"}))
	require.ErrorContains(t, err, "MERCHANT_TOKEN_FILE")
}

// startWithoutBroker starts walletsvc in dev on a database of its own with settings, its
// name server one that hangs up (binarytest.HangUp) and a topic and producer group of its
// own.
func startWithoutBroker(t *testing.T, settings map[string]string) *procs.Func {
	t.Helper()
	_, dbURL := testdb.New(t)
	env := binarytest.DevEnv(map[string]string{
		"DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": binarytest.HangUp(t),
		"WALLET_EVENTS_TOPIC": rmqtest.Unique("run-events"), "PRODUCER_GROUP": rmqtest.Unique("run-relay"),
	})
	maps.Copy(env, settings)
	return procs.StartFuncTest(t, "walletsvc", run, nil, env)
}
