package deploy

// These tests hold docker-compose.yml, Dockerfile, .dockerignore, rocketmq/broker.conf and
// the Prometheus and Grafana provisioning to what `docker compose up` needs, without a Docker
// engine: the compose file is loaded with the compose-spec loader, the others are read as
// text (promtool checks prometheus/prometheus.yml), every file mounted must exist, and the
// topic creator's script is run against a stand-in mqadmin. cmd/walletsvc and cmd/notifier
// check that the environment given to their binaries is their configuration, and that
// Prometheus scrapes them where they listen.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The stack: what runs, what runs once, and who waits for whom.
var (
	longRunning = []string{"postgres", "namesrv", "broker", "providersim", "walletsvc", "notifier", "traces", "prometheus", "grafana"}
	oneShot     = []string{"topics", "migrate", "notifier-migrate", "demo"}
	// Services built from ./Dockerfile rather than pulled.
	built = []string{"migrate", "notifier-migrate", "providersim", "walletsvc", "notifier", "traces", "demo"}

	wantDeps = map[string]map[string]string{
		"postgres":         {},
		"namesrv":          {},
		"broker":           {"namesrv": types.ServiceConditionHealthy},
		"topics":           {"broker": types.ServiceConditionHealthy},
		"migrate":          {"postgres": types.ServiceConditionHealthy},
		"notifier-migrate": {"postgres": types.ServiceConditionHealthy},
		"providersim":      {"postgres": types.ServiceConditionHealthy},
		"walletsvc": {
			"postgres":    types.ServiceConditionHealthy,
			"migrate":     types.ServiceConditionCompletedSuccessfully,
			"topics":      types.ServiceConditionCompletedSuccessfully,
			"providersim": types.ServiceConditionHealthy,
			"traces":      types.ServiceConditionHealthy,
		},
		"notifier": {
			"postgres":         types.ServiceConditionHealthy,
			"notifier-migrate": types.ServiceConditionCompletedSuccessfully,
			"topics":           types.ServiceConditionCompletedSuccessfully,
			"traces":           types.ServiceConditionHealthy,
		},
		"traces": {},
		"demo": {
			"walletsvc": types.ServiceConditionHealthy,
			"notifier":  types.ServiceConditionHealthy,
		},
		// Prometheus waits for no service it scrapes: one that is down is what it shows.
		"prometheus": {},
		"grafana":    {"prometheus": types.ServiceConditionHealthy},
	}

	// Published ports, service → container port → host port (all on 127.0.0.1), as the
	// defaults of their variables give them. The notifier's is a range: one port per replica.
	wantPorts = map[string]map[uint32]string{
		"postgres":    {5432: "55432"},
		"namesrv":     {9876: "9876"},
		"broker":      {10911: "10911"},
		"walletsvc":   {8080: "8080"},
		"notifier":    {8081: "8081-8089"},
		"providersim": {8082: "8090"},
		"traces":      {4318: "4318"},
		"prometheus":  {9090: "9090"},
		"grafana":     {3000: "3000"},
	}
)

func TestComposeServices(t *testing.T) {
	t.Parallel()
	p := project(t)
	require.Equal(t, ProjectName, p.Name)
	want := append(slices.Clone(longRunning), oneShot...)
	require.ElementsMatch(t, want, p.ServiceNames(), "services of docker-compose.yml")
	for _, name := range oneShot {
		svc := service(t, name)
		assert.Equal(t, "no", svc.Restart, "%s runs once: restart must be \"no\"", name)
	}
	for _, name := range longRunning {
		assert.NotEqual(t, "no", service(t, name).Restart, "%s", name)
	}
}

func TestComposeHealthChecks(t *testing.T) {
	t.Parallel()
	for _, name := range longRunning {
		svc := service(t, name)
		hc := svc.HealthCheck
		if !assert.NotNil(t, hc, "%s runs for good: it needs a health check", name) {
			continue
		}
		assert.False(t, hc.Disable, "%s", name)
		if assert.GreaterOrEqual(t, len(hc.Test), 2, "%s: health check test", name) {
			assert.Contains(t, []string{"CMD", "CMD-SHELL"}, hc.Test[0], "%s", name)
		}
		assert.NotNil(t, hc.Interval, "%s: interval", name)
		assert.NotNil(t, hc.Timeout, "%s: timeout", name)
		assert.NotNil(t, hc.Retries, "%s: retries", name)
		test := strings.Join(hc.Test, " ")
		switch name {
		case "walletsvc", "notifier":
			// /readyz: the database answers (the broker is reported there, not required).
			assert.Contains(t, test, "http://127.0.0.1:"+httpPort(t, name)+"/readyz", "%s", name)
		case "traces":
			assert.Contains(t, test, "http://127.0.0.1:"+httpPort(t, name)+"/healthz", "%s", name)
		case "providersim":
			// /healthz: it serves (it has migrated its schema before it listens).
			assert.Contains(t, test, "http://127.0.0.1:"+httpPort(t, name)+"/healthz", "%s", name)
		case "namesrv", "broker":
			for target := range wantPorts[name] {
				assert.Contains(t, test, "/dev/tcp/127.0.0.1/"+strconv.Itoa(int(target)), "%s", name)
			}
		case "postgres":
			// Over TCP, which the image's initialisation server does not listen on.
			assert.Contains(t, test, "pg_isready -h 127.0.0.1", "%s", name)
		case "prometheus":
			// Ready: the rules and the storage are loaded.
			assert.Contains(t, test, "http://127.0.0.1:"+onlyTarget(t, name)+"/-/ready", "%s", name)
		case "grafana":
			assert.Contains(t, test, "http://127.0.0.1:"+onlyTarget(t, name)+"/api/health", "%s", name)
		}
	}
	for _, name := range oneShot {
		assert.Nil(t, service(t, name).HealthCheck, "%s runs once: others wait for it to complete, not to be healthy", name)
	}
}

func TestComposeDependsOn(t *testing.T) {
	t.Parallel()
	p := project(t)
	for _, name := range p.ServiceNames() {
		got := map[string]string{}
		for dep, d := range service(t, name).DependsOn {
			got[dep] = d.Condition
			assert.True(t, d.Required, "%s → %s must be required", name, dep)
			// Whatever the table says, the condition has to fit the dependency.
			switch {
			case slices.Contains(oneShot, dep):
				assert.Equal(t, types.ServiceConditionCompletedSuccessfully, d.Condition, "%s → %s (runs once)", name, dep)
			default:
				assert.Equal(t, types.ServiceConditionHealthy, d.Condition, "%s → %s (runs for good)", name, dep)
			}
		}
		want, ok := wantDeps[name]
		require.True(t, ok, "no expectation for service %s", name)
		assert.Equal(t, want, got, "depends_on of %s", name)
	}
}

func TestComposePorts(t *testing.T) {
	t.Parallel()
	p := project(t)
	for _, name := range p.ServiceNames() {
		got := map[uint32]string{}
		for _, pc := range service(t, name).Ports {
			got[pc.Target] = pc.Published
			assert.Equal(t, "127.0.0.1", pc.HostIP, "%s: publish on loopback only", name)
			assert.Equal(t, "tcp", pc.Protocol, "%s", name)
		}
		want := wantPorts[name]
		if want == nil {
			want = map[uint32]string{}
		}
		assert.Equal(t, want, got, "published ports of %s (container → host)", name)
	}
	for _, name := range []string{"walletsvc", "notifier", "providersim"} {
		port, err := strconv.Atoi(httpPort(t, name))
		require.NoError(t, err)
		assert.Contains(t, wantPorts[name], uint32(port), "%s: HTTP_ADDR's port is the published one", name) //nolint:gosec // G115: a TCP port, which SplitHostPort and Atoi gave
	}
}

func TestComposeAppServices(t *testing.T) {
	t.Parallel()
	binaries := dockerfileBinaries(t)
	pgPort := onlyTarget(t, "postgres")
	for _, name := range built {
		svc := service(t, name)
		require.NotEmpty(t, svc.Command, "%s: command", name)
		assert.Empty(t, svc.Entrypoint, "%s: the image has no entrypoint; the command is the binary", name)
		assert.Contains(t, binaries, svc.Command[0], "%s runs a binary the Dockerfile does not put in the image", name)
	}
	for _, name := range []string{"migrate", "notifier-migrate", "walletsvc", "notifier", "providersim"} {
		e := env(t, name)
		u, err := url.Parse(e["DATABASE_URL"])
		if assert.NoError(t, err, "%s: DATABASE_URL", name) {
			assert.Equal(t, "postgres:"+pgPort, u.Host, "%s: DATABASE_URL", name)
			assert.Equal(t, "/"+env(t, "postgres")["POSTGRES_DB"], u.Path, "%s: database", name)
		}
		assert.Equal(t, "json", e["LOG_FORMAT"], "%s", name)
	}
	for _, name := range []string{"walletsvc", "notifier"} {
		e := env(t, name)
		assert.Equal(t, "false", e["MIGRATE_ON_START"], "%s: the migrate job has run", name)
		assert.Equal(t, "namesrv:"+onlyTarget(t, "namesrv"), e["ROCKETMQ_NAMESRV"], "%s", name)
	}
	assert.Equal(t, []string{"/walletsvc", "migrate"}, []string(service(t, "migrate").Command))
	assert.Equal(t, []string{"/notifier", "migrate"}, []string(service(t, "notifier-migrate").Command), "each service migrates its own schema")
}

// The payment gateway and the merchant are the simulator, in dev mode (it refuses to start
// otherwise), and walletsvc reaches both where it listens.
func TestComposeProviderSimulator(t *testing.T) {
	t.Parallel()
	svc := service(t, "providersim")
	assert.Equal(t, []string{"/providersim", "serve"}, []string(svc.Command))
	assert.Equal(t, "dev", env(t, "providersim")["WALLETSAGA_ENV"], "the simulator runs only in dev")
	w := env(t, "walletsvc")
	for _, v := range []string{"PAYMENT_GATEWAY_URL", "MERCHANT_URL"} {
		u, err := url.Parse(w[v])
		if assert.NoError(t, err, v) {
			assert.Equal(t, "http", u.Scheme, v)
			assert.Equal(t, "providersim:"+httpPort(t, "providersim"), u.Host, "walletsvc's %s reaches the simulator where it listens", v)
		}
	}
}

// The demo runner plays exactly what `make demo` plays: /demo with no arguments (the
// scenario is fixed in the binary), pointed at the two services, reading the notifier with
// the read token the notifier runs with, exiting when done. The notifier runs with the
// story's failure switches set explicitly (they are off unless configured).
func TestComposeDemoRunner(t *testing.T) {
	t.Parallel()
	svc := service(t, "demo")
	assert.Empty(t, svc.Entrypoint, "demo: entrypoint")
	assert.Equal(t, []string{"/demo"}, []string(svc.Command), "demo: command")
	e := env(t, "demo")
	n := env(t, "notifier")
	// Its links open on the host: the published ports, not the container host names. It
	// prints the deposit's trace from the stack's receiver, and the consoles' links with the
	// operators' token the services run with.
	assert.Equal(t, map[string]string{
		"WALLETSVC_URL":      "http://walletsvc:8080",
		"NOTIFIER_URL":       "http://notifier:8081",
		"WALLETSVC_LINK_URL": "http://127.0.0.1:" + wantPorts["walletsvc"][8080],
		"NOTIFIER_LINK_URL":  "http://127.0.0.1:8081",
		"DEMO_TRACES_URL":    "http://traces:" + httpPort(t, "traces"),
		"READ_TOKEN":         n["READ_TOKEN"],
		"OPERATOR_TOKEN":     e["OPERATOR_TOKEN"],
		"DEMO_EXIT":          "1",
	}, e)
	assert.Equal(t, n["OPERATOR_TOKENS"], env(t, "walletsvc")["OPERATOR_TOKENS"], "one operator for both consoles")
	digest := sha256.Sum256([]byte(e["OPERATOR_TOKEN"]))
	assert.Equal(t, "dev-operator:sha256:"+hex.EncodeToString(digest[:]), n["OPERATOR_TOKENS"],
		"the consoles' operator actions work out of the box in dev, with the token the demo prints")
	for _, name := range []string{"walletsvc", "notifier"} {
		assert.Equal(t, "http://traces:"+httpPort(t, "traces"), env(t, name)["OTEL_EXPORTER_OTLP_ENDPOINT"], "%s exports its spans to the stack's receiver", name)
	}
	assert.Equal(t, []string{"/demo", "otlp-sink"}, []string(service(t, "traces").Command))
	assert.Equal(t, []string{"demo"}, svc.Profiles, "the demo is played by `docker compose run --rm demo`, not by up")
	assert.Equal(t, []string{"grafana"}, service(t, "grafana").Profiles, "Grafana, which has no stand-in, is in a profile of its own")
	assert.GreaterOrEqual(t, len(n["READ_TOKEN"]), 16, "the notifier's READ_TOKEN")
	assert.Equal(t, "0000$", n["SMS_FAIL_PHONE_PATTERN"], "the story's phone failure switch")
	assert.Equal(t, "404", n["SMS_FAIL_AMOUNT"], "the story's amount failure switch")
	for v, target := range map[string]string{"WALLETSVC_URL": "walletsvc", "NOTIFIER_URL": "notifier"} {
		u, err := url.Parse(e[v])
		if assert.NoError(t, err, v) {
			assert.Equal(t, target+":"+httpPort(t, target), u.Host, "%s reaches %s where it listens", v, target)
		}
	}
}
