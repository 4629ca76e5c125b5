package deploy

// These tests hold docker-compose.yml, Dockerfile, .dockerignore, rocketmq/broker.conf and
// the Prometheus and Grafana provisioning to what `docker compose up` needs, without a Docker
// engine: the compose file is loaded with the compose-spec loader, the others are read as
// text (promtool checks prometheus/prometheus.yml), every file mounted must exist, and the
// topic creator's script is run against a stand-in mqadmin. cmd/walletsvc and cmd/notifier
// check that the environment given to their binaries is their configuration, and that
// Prometheus scrapes them where they listen.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const root = ".."

var loadProject = sync.OnceValues(func() (*types.Project, error) {
	return LoadCompose(context.Background(), root)
})

func project(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadProject()
	require.NoError(t, err)
	return p
}

func service(t *testing.T, name string) types.ServiceConfig {
	t.Helper()
	svc, err := project(t).GetService(name)
	require.NoError(t, err)
	return svc
}

func env(t *testing.T, name string) map[string]string {
	t.Helper()
	e, err := Environment(service(t, name))
	require.NoError(t, err)
	return e
}

// The stack: what runs, what runs once, and who waits for whom.
var (
	longRunning = []string{"postgres", "namesrv", "broker", "providersim", "walletsvc", "notifier", "prometheus", "grafana"}
	oneShot     = []string{"topics", "migrate", "notifier-migrate", "demo"}
	// Services built from ./Dockerfile rather than pulled.
	built = []string{"migrate", "notifier-migrate", "providersim", "walletsvc", "notifier", "demo"}

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
		},
		"notifier": {
			"postgres":         types.ServiceConditionHealthy,
			"notifier-migrate": types.ServiceConditionCompletedSuccessfully,
			"topics":           types.ServiceConditionCompletedSuccessfully,
		},
		"demo": {
			"walletsvc": types.ServiceConditionHealthy,
			"notifier":  types.ServiceConditionHealthy,
		},
		// Prometheus waits for no service it scrapes: one that is down is what it shows.
		"prometheus": {},
		"grafana":    {"prometheus": types.ServiceConditionHealthy},
	}

	// Published ports, service → container port → host port (all on 127.0.0.1).
	wantPorts = map[string]map[uint32]string{
		"postgres":    {5432: "55432"},
		"namesrv":     {9876: "9876"},
		"broker":      {10911: "10911"},
		"walletsvc":   {8080: "8080"},
		"notifier":    {8081: "8081"},
		"providersim": {8082: "8082"},
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

// splitImage splits "repo[:tag][@digest]"; a registry port ("host:5000/x") is not a tag.
func splitImage(ref string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

func requirePinned(t *testing.T, what, ref string) (repo, tag string) {
	t.Helper()
	repo, tag, digest := splitImage(ref)
	assert.True(t, tag != "" || digest != "", "%s: image %q has neither tag nor digest", what, ref)
	assert.NotEqual(t, "latest", tag, "%s: image %q", what, ref)
	return repo, tag
}

// servicesShVars returns the variables scripts/services.sh sets to a literal or to a literal
// default (VAR="literal", VAR="${VAR:-default}"): the dev stack the compose stack mirrors.
func servicesShVars(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "scripts", "services.sh"))
	require.NoError(t, err)
	vars := map[string]string{}
	re := regexp.MustCompile(`(?m)^([A-Z_]+)="(?:\$\{([A-Z_]+):-([^}$"]*)\}|([^$"]*))"\s*$`)
	for _, m := range re.FindAllSubmatch(b, -1) {
		if len(m[2]) > 0 && string(m[2]) != string(m[1]) {
			continue
		}
		vars[string(m[1])] = string(m[3]) + string(m[4])
	}
	return vars
}

func servicesShVar(t *testing.T, name string) string {
	t.Helper()
	v, ok := servicesShVars(t)[name]
	require.True(t, ok, "scripts/services.sh sets no literal %s", name)
	return v
}

func TestComposeImagesArePinned(t *testing.T) {
	t.Parallel()
	p := project(t)
	rmqVersion := servicesShVar(t, "RMQ_VERSION")
	for _, name := range p.ServiceNames() {
		svc := service(t, name)
		require.NotEmpty(t, svc.Image, "%s: no image", name)
		repo, tag := requirePinned(t, name, svc.Image)
		if slices.Contains(built, name) {
			require.NotNil(t, svc.Build, "%s runs the project's binaries: it must be built from ./Dockerfile", name)
			assert.Equal(t, p.WorkingDir, svc.Build.Context, "%s: build context", name)
			assert.Equal(t, "Dockerfile", svc.Build.Dockerfile, "%s", name)
			// One image for all of them, so that `up` builds one thing.
			assert.Equal(t, service(t, built[0]).Image, svc.Image, "%s: image name", name)
			continue
		}
		assert.Nil(t, svc.Build, "%s: only the project's own services are built", name)
		if repo == "apache/rocketmq" {
			assert.Equal(t, rmqVersion, tag, "%s: the RocketMQ image must be the version of the dev stack (RMQ_VERSION in scripts/services.sh)", name)
			assert.True(t, strings.HasPrefix(tag, "5."), "%s: RocketMQ 5.x", name)
		}
	}
	for _, name := range []string{"namesrv", "broker", "topics"} {
		repo, _, _ := splitImage(service(t, name).Image)
		assert.Equal(t, "apache/rocketmq", repo, "%s: the official image", name)
	}
	repo, _, _ := splitImage(service(t, "postgres").Image)
	assert.Equal(t, "postgres", repo)

	// The official images. Prometheus is the release whose PromQL parser the dashboards'
	// and rules' tests parse with. Grafana's open-source image is grafana/grafana: the
	// grafana/grafana-oss repository, the same image, gets no tags after 12.3.
	repo, tag, _ := splitImage(service(t, "prometheus").Image)
	assert.Equal(t, "prom/prometheus", repo)
	assert.Equal(t, prometheusRelease(t), tag, "prometheus: the release of the parser module in go.mod")
	repo, tag, _ = splitImage(service(t, "grafana").Image)
	assert.Equal(t, "grafana/grafana", repo)
	assert.Regexp(t, `^12\.4\.[0-9]+$`, tag, "grafana: 12.4, the last 12.x (13 saves dashboards in a format file provisioning refuses)")
}

// prometheusRelease returns the Prometheus release of the github.com/prometheus/prometheus
// module go.mod requires: module v0.316.0 is release v3.16.0.
func prometheusRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/prometheus v0\.([0-9]+)\.([0-9]+)\s*$`).FindSubmatch(b)
	require.NotNil(t, m, "go.mod requires github.com/prometheus/prometheus v0.N.P")
	minor, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return fmt.Sprintf("v%d.%d.%s", minor/100, minor%100, m[2])
}

func TestComposeRocketMQHeapsAreSmall(t *testing.T) {
	t.Parallel()
	// The images' run scripts append JAVA_OPT_EXT after their own heap flags (of a repeated
	// flag the JVM keeps the last), so these replace the defaults of 1 GB and more.
	for _, name := range []string{"namesrv", "broker"} {
		opts := strings.Fields(env(t, name)["JAVA_OPT_EXT"])
		for _, flag := range []string{"-Xms", "-Xmx", "-Xmn"} {
			i := slices.IndexFunc(opts, func(o string) bool { return strings.HasPrefix(o, flag) })
			if assert.GreaterOrEqual(t, i, 0, "%s: JAVA_OPT_EXT sets no %s", name, flag) {
				v := strings.TrimSuffix(strings.TrimPrefix(opts[i], flag), "m")
				mb, err := strconv.Atoi(v)
				if assert.NoError(t, err, "%s: %s in megabytes (NNNm)", name, opts[i]) {
					assert.LessOrEqual(t, mb, 512, "%s: %s", name, opts[i])
				}
			}
		}
	}
}

// httpPort returns the port of a service's HTTP_ADDR.
func httpPort(t *testing.T, name string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(env(t, name)["HTTP_ADDR"])
	require.NoError(t, err, "%s: HTTP_ADDR", name)
	require.Equal(t, "0.0.0.0", host, "%s: HTTP_ADDR must listen beyond the container's loopback", name)
	return port
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

func onlyTarget(t *testing.T, name string) string {
	t.Helper()
	ports := service(t, name).Ports
	require.Len(t, ports, 1, "%s: ports", name)
	return strconv.Itoa(int(ports[0].Target))
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
	assert.Equal(t, map[string]string{
		"WALLETSVC_URL": "http://walletsvc:8080",
		"NOTIFIER_URL":  "http://notifier:8081",
		"READ_TOKEN":    n["READ_TOKEN"],
		"DEMO_EXIT":     "1",
	}, e)
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

// readProperties reads a Java properties file of plain key=value lines.
func readProperties(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read only: closing it loses nothing
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q is not key=value", path, line)
		require.Equal(t, strings.TrimSpace(line), line, "%s: %q: no surrounding spaces (RocketMQ keeps them)", path, line)
		require.NotContains(t, props, k, "%s: %s twice", path, k)
		props[k] = v
	}
	require.NoError(t, sc.Err())
	return props
}

// devBrokerProperties returns the broker.properties scripts/services.sh writes with access
// control on (its default), with the script's literal variables substituted.
func devBrokerProperties(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "scripts", "services.sh"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)cat >"\$props" <<-EOF\n(.*?)\n\s*EOF`).FindSubmatch(b)
	require.NotNil(t, m, "scripts/services.sh writes no broker.properties")
	acl := regexp.MustCompile(`(?s)if \[ "\$RMQ_ACL" = on \]; then.*?cat >>"\$props" <<-EOF\n(.*?)\n\s*EOF`).FindSubmatch(b)
	require.NotNil(t, acl, "scripts/services.sh adds no access control to broker.properties")
	vars := servicesShVars(t)
	require.Equal(t, "on", vars["RMQ_ACL"], "the dev broker runs with access control by default")
	props := map[string]string{}
	for _, line := range strings.Split(string(m[1])+"\n"+string(acl[1]), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		require.True(t, ok, "services.sh broker.properties: %q", line)
		// Variables that are not literals (paths, addresses) stay as they are.
		props[k] = regexp.MustCompile(`\$[A-Z_]+`).ReplaceAllStringFunc(v, func(ref string) string {
			if lit, ok := vars[ref[1:]]; ok {
				return lit
			}
			return ref
		})
	}
	return props
}

func TestBrokerConf(t *testing.T) {
	t.Parallel()
	svc := service(t, "broker")
	i := slices.Index(svc.Command, "-c")
	require.True(t, i >= 0 && i+1 < len(svc.Command), "broker: command has no -c CONFIG: %q", svc.Command)
	confPath := svc.Command[i+1]
	var mounted string
	for _, v := range svc.Volumes {
		if v.Target == confPath {
			mounted = v.Source
			assert.True(t, v.ReadOnly, "broker.conf is mounted read-only")
		}
	}
	abs, err := filepath.Abs(filepath.Join(root, "deploy", "rocketmq", "broker.conf"))
	require.NoError(t, err)
	require.Equal(t, abs, mounted, "broker: %s must be deploy/rocketmq/broker.conf", confPath)

	conf := readProperties(t, abs)
	// Clients reach the broker at the address it advertises: the compose host name.
	assert.Equal(t, "broker", conf["brokerIP1"])
	assert.Equal(t, "namesrv:"+onlyTarget(t, "namesrv"), conf["namesrvAddr"])
	assert.Equal(t, onlyTarget(t, "broker"), conf["listenPort"])
	assert.NotContains(t, conf, "bindAddress", "in a container the broker listens on every interface")

	// Everything else as the dev broker of scripts/services.sh.
	where := map[string]bool{"brokerIP1": true, "namesrvAddr": true, "bindAddress": true, "listenPort": true,
		"storePathRootDir": true, "storePathCommitLog": true, "brokerName": true}
	assert.Equal(t, "broker-a", conf["brokerName"], "the compose broker is the dev stack's first broker")
	dev := devBrokerProperties(t)
	for k, v := range dev {
		if !where[k] {
			assert.NotContains(t, v, "$", "dev broker's %s is not a literal", k)
			assert.Equal(t, v, conf[k], "broker.conf %s differs from the dev broker's", k)
		}
	}
	for k := range conf {
		_, inDev := dev[k]
		assert.True(t, inDev, "broker.conf sets %s, which the dev broker does not", k)
	}
}

// The topic creator's script, run against a stand-in mqadmin that records its arguments and,
// like the real one, exits 0 whether or not the broker accepted.
func TestComposeTopicsCreator(t *testing.T) {
	t.Parallel()
	svc := service(t, TopicsService)
	assert.Empty(t, svc.Entrypoint)
	topics, err := Topics(project(t))
	require.NoError(t, err)
	require.Equal(t, map[string]int{"wallet-events": 8, "%RETRY%wallet-notifier": 1, "%DLQ%wallet-notifier": 1}, topics)

	conf := readProperties(t, filepath.Join(root, "deploy", "rocketmq", "broker.conf"))
	target := "-n " + conf["namesrvAddr"] + " -c " + conf["brokerClusterName"]
	var want []string
	for _, topic := range []string{"wallet-events", "%RETRY%wallet-notifier", "%DLQ%wallet-notifier"} {
		q := strconv.Itoa(topics[topic])
		want = append(want, strings.Join([]string{"updateTopic", target, "-t", topic, "-r", q, "-w", q, "-o", "false"}, " "))
	}
	// The users and rights scripts/services.sh gives the dev broker.
	v := servicesShVars(t)
	wallet, notifier, group := v["RMQ_WALLET_USER"], v["RMQ_NOTIFIER_USER"], v["RMQ_NOTIFIER_GROUP"]
	want = append(want,
		"createUser "+target+" -u "+wallet+" -p "+v["RMQ_WALLET_SECRET"]+" -t Normal",
		"createUser "+target+" -u "+notifier+" -p "+v["RMQ_NOTIFIER_SECRET"]+" -t Normal",
		"createAcl "+target+" -s User:"+wallet+" -r Topic:"+v["RMQ_EVENTS_TOPIC"]+" -a Pub -d Allow",
		"createAcl "+target+" -s User:"+notifier+" -r Topic:"+v["RMQ_EVENTS_TOPIC"]+",Group:"+group+",Group:"+group+"-dlq-reconciler -a Sub,Get -d Allow",
		"createAcl "+target+" -s User:"+notifier+" -r Topic:%DLQ%"+group+" -a Pub,Sub -d Allow",
	)
	for _, name := range []string{"walletsvc", "notifier"} {
		e := env(t, name)
		user, secret := wallet, v["RMQ_WALLET_SECRET"]
		if name == "notifier" {
			user, secret = notifier, v["RMQ_NOTIFIER_SECRET"]
		}
		assert.Equal(t, user, e["ROCKETMQ_ACCESS_KEY"], "%s signs as the user the topics job creates", name)
		assert.Equal(t, secret, e["ROCKETMQ_SECRET_KEY"], "%s", name)
	}
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "the topic creator is a bash script")

	run := func(t *testing.T, failFirst int) (calls []string, stderr string, err error) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "home", "bin"), 0o750))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "path"), 0o750))
		log := filepath.Join(dir, "calls")
		//nolint:gosec // G306: a stand-in executable in the test's temporary directory
		require.NoError(t, os.WriteFile(filepath.Join(dir, "home", "bin", "mqadmin"), []byte(`
printf '%s\n' "$*" >>"$CALLS"
if [ "$(wc -l <"$CALLS")" -le "$FAIL_FIRST" ]; then
	echo 'org.apache.rocketmq.tools.command.SubCommandException: UpdateTopicSubCommand command failed'
	exit 0
fi
echo 'create topic to broker:10911 success.'
`), 0o700))
		// The retries sleep; not here.
		require.NoError(t, os.WriteFile(filepath.Join(dir, "path", "sleep"), []byte("#!/bin/sh\nexit 0\n"), 0o700)) //nolint:gosec // G306: a stand-in executable in the test's temporary directory
		cmd := exec.Command(bash, "-c", svc.Command[2])
		cmd.Env = []string{
			"ROCKETMQ_HOME=" + filepath.Join(dir, "home"),
			"PATH=" + filepath.Join(dir, "path") + string(os.PathListSeparator) + os.Getenv("PATH"),
			"CALLS=" + log,
			"FAIL_FIRST=" + strconv.Itoa(failFirst),
		}
		var errb strings.Builder
		cmd.Stderr = &errb
		err = cmd.Run()
		b, rerr := os.ReadFile(log)
		require.NoError(t, rerr)
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), errb.String(), err
	}

	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		calls, stderr, err := run(t, 0)
		require.NoError(t, err, stderr)
		assert.Equal(t, want, calls)
	})
	t.Run("accepted after the broker registers", func(t *testing.T) {
		t.Parallel()
		calls, stderr, err := run(t, 3)
		require.NoError(t, err, stderr)
		assert.Equal(t, append([]string{want[0], want[0], want[0]}, want...), calls)
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		calls, stderr, err := run(t, 1<<30)
		require.Error(t, err, "mqadmin printed no success: the topic creator must fail")
		assert.Contains(t, stderr, "creating wallet-events (8 queues) failed")
		assert.Contains(t, stderr, "UpdateTopicSubCommand command failed", "mqadmin's answer is shown")
		assert.Len(t, calls, 30, "bounded retries")
	})
}

// The topics job's mqadmin signs as the broker's admin: tools.yml, mounted over the image's,
// holds the user broker.conf creates, the dev stack's admin.
func TestComposeMqadminSignsAsTheAdmin(t *testing.T) {
	t.Parallel()
	const target = "/home/rocketmq/rocketmq-5.3.3/conf/tools.yml"
	var mounted string
	for _, v := range service(t, TopicsService).Volumes {
		if v.Target == target {
			mounted = v.Source
			assert.True(t, v.ReadOnly, "tools.yml is mounted read-only")
		}
	}
	abs, err := filepath.Abs(filepath.Join(root, "deploy", "rocketmq", "tools.yml"))
	require.NoError(t, err)
	require.Equal(t, abs, mounted, "%s must be deploy/rocketmq/tools.yml", target)
	b, err := os.ReadFile(abs)
	require.NoError(t, err)
	keys := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	v := servicesShVars(t)
	assert.Equal(t, map[string]string{"accessKey": v["RMQ_ADMIN_USER"], "secretKey": v["RMQ_ADMIN_SECRET"]}, keys)
	conf := readProperties(t, filepath.Join(root, "deploy", "rocketmq", "broker.conf"))
	assert.Equal(t, `{"username":"`+keys["accessKey"]+`","password":"`+keys["secretKey"]+`"}`, conf["initAuthenticationUser"])
}

// dockerInstr is one instruction of a Dockerfile, continuation lines joined.
type dockerInstr struct{ cmd, args string }

func readDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	var out []dockerInstr
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stages splits a Dockerfile into its stages, each starting with its FROM.
func stages(instrs []dockerInstr) [][]dockerInstr {
	var out [][]dockerInstr
	for _, in := range instrs {
		if in.cmd == "FROM" {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], in)
		}
	}
	return out
}

// dockerfileBinaries returns the absolute paths of what the final stage copies from the build.
func dockerfileBinaries(t *testing.T) []string {
	t.Helper()
	st := stages(readDockerfile(t))
	require.NotEmpty(t, st)
	var bins []string
	for _, in := range st[len(st)-1] {
		if in.cmd != "COPY" || !strings.HasPrefix(in.args, "--from=build ") {
			continue
		}
		f := strings.Fields(in.args)[1:]
		if f[len(f)-1] != "/" {
			continue
		}
		for _, src := range f[:len(f)-1] {
			bins = append(bins, "/"+filepath.Base(src))
		}
	}
	return bins
}

func versionAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range w {
		if i >= len(h) {
			return false
		}
		a, _ := strconv.Atoi(h[i])
		b, _ := strconv.Atoi(w[i])
		if a != b {
			return a > b
		}
	}
	return true
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	st := stages(readDockerfile(t))
	require.Len(t, st, 2, "a build stage and a runtime stage")
	build, final := st[0], st[len(st)-1]

	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(gomod)
	require.NotNil(t, goVersion)

	for i, s := range st {
		f := strings.Fields(s[0].args)
		repo, tag := requirePinned(t, "Dockerfile FROM", f[0])
		if i == 0 {
			// The golang images set GOTOOLCHAIN=local: they build only what their Go accepts.
			require.Equal(t, "golang", repo)
			assert.True(t, versionAtLeast(strings.SplitN(tag, "-", 2)[0], string(goVersion[1])),
				"golang:%s is older than go.mod's go %s", tag, goVersion[1])
			require.Equal(t, []string{"AS", "build"}, []string{strings.ToUpper(f[1]), f[2]}, "the first stage is `build`")
		}
	}

	// go.mod's local replacements have to be in the build context before `go mod download`.
	download := slices.IndexFunc(build, func(in dockerInstr) bool { return in.cmd == "RUN" && strings.Contains(in.args, "go mod download") })
	require.GreaterOrEqual(t, download, 0, "build stage: RUN go mod download (a cached layer of the modules)")
	var copied []string
	for _, in := range build[:download] {
		if in.cmd == "COPY" {
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, filepath.Clean(src))
			}
		}
	}
	need := []string{"go.mod", "go.sum"}
	for _, m := range regexp.MustCompile(`(?m)^replace\s+\S+(?:\s+\S+)?\s+=>\s+(\./\S+)\s*$`).FindAllSubmatch(gomod, -1) {
		need = append(need, filepath.Clean(string(m[1])))
	}
	require.Greater(t, len(need), 2, "go.mod replaces rocketmq-client-go with ./third_party/…")
	for _, n := range need {
		assert.Contains(t, copied, n, "build stage: COPY %s before go mod download", n)
	}

	var buildLine string
	var cgoOff bool
	for _, in := range build {
		if in.cmd == "ENV" && regexp.MustCompile(`(^|\s)CGO_ENABLED=0(\s|$)`).MatchString(in.args) {
			cgoOff = true
		}
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildLine = in.args
			cgoOff = cgoOff || strings.Contains(in.args, "CGO_ENABLED=0")
		}
	}
	assert.True(t, cgoOff, "static binaries: CGO_ENABLED=0")
	bins := dockerfileBinaries(t)
	assert.ElementsMatch(t, []string{"/walletsvc", "/notifier", "/providersim", "/demo"}, bins, "binaries in the image")
	for _, bin := range bins {
		pkg := "./cmd" + bin
		assert.Contains(t, strings.Fields(buildLine), pkg, "the build stage builds %s", pkg)
		_, err := os.Stat(filepath.Join(root, "cmd", bin[1:]))
		assert.NoError(t, err, "%s is a package of this repository", pkg)
	}

	var user string
	for _, in := range final {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	assert.NotContains(t, []string{"", "0", "root"}, uid, "the image runs as a non-root user")

	// The health checks of the built services run wget: the runtime base must have it.
	base, _, _ := splitImage(strings.Fields(final[0].args)[0])
	for _, name := range built {
		if hc := service(t, name).HealthCheck; hc != nil && slices.Contains(hc.Test, "wget") {
			assert.Contains(t, []string{"busybox", "alpine"}, base, "%s's health check runs wget", name)
		}
	}
}

func TestDockerignore(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	for _, p := range []string{".git", ".run"} {
		assert.Contains(t, patterns, p, ".dockerignore keeps %s out of the build context", p)
	}
	for _, p := range patterns {
		assert.False(t, strings.HasPrefix(p, "!"), "no re-includes: %s", p)
		for _, keep := range []string{"go.mod", "go.sum", "third_party", "cmd", "internal", "migrations", "Dockerfile"} {
			match, _ := filepath.Match(p, keep)
			assert.False(t, match, ".dockerignore pattern %q drops %s, which the build needs", p, keep)
		}
	}
}

// mount is a bind mount of a compose service: a file or directory of the repository.
type mount struct {
	rel    string // the source, relative to the repository root
	target string // where the container sees it
}

// mounts returns name's bind mounts, failing t unless each is of the repository, exists and
// is read-only.
func mounts(t *testing.T, name string) []mount {
	t.Helper()
	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	var out []mount
	for _, v := range service(t, name).Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		rel, err := filepath.Rel(repo, v.Source)
		require.NoError(t, err)
		require.False(t, rel == ".." || strings.HasPrefix(rel, "../"), "%s mounts %s, outside the repository", name, v.Source)
		_, err = os.Stat(v.Source)
		require.NoError(t, err, "%s mounts %s, which does not exist", name, rel)
		assert.True(t, v.ReadOnly, "%s mounts %s read-only", name, rel)
		out = append(out, mount{rel: filepath.ToSlash(rel), target: v.Target})
	}
	return out
}

// mountOf returns where name mounts rel (a path relative to the repository root).
func mountOf(t *testing.T, name, rel string) string {
	t.Helper()
	for _, m := range mounts(t, name) {
		if m.rel == rel {
			return m.target
		}
	}
	t.Fatalf("%s does not mount %s", name, rel)
	return ""
}

// Every file or directory a service mounts from the repository exists, read-only; every
// provisioning file of deploy/grafana is mounted.
func TestComposeMountedFilesExist(t *testing.T) {
	t.Parallel()
	p := project(t)
	mounted := map[string]bool{}
	for _, name := range p.ServiceNames() {
		for _, m := range mounts(t, name) {
			mounted[m.rel] = true
		}
	}
	for _, rel := range []string{"deploy/rocketmq/broker.conf", "deploy/rocketmq/tools.yml", PrometheusConfigFile,
		"deploy/prometheus/rules.yml", "deploy/grafana/dashboards"} {
		assert.True(t, mounted[rel], "%s is mounted", rel)
	}
	err := filepath.WalkDir(filepath.Join(root, "deploy", "grafana", "provisioning"), func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, file)
		assert.True(t, mounted[filepath.ToSlash(rel)], "%s is not mounted into Grafana", rel)
		return err
	})
	require.NoError(t, err)
}

// Prometheus reads the mounted configuration, which loads the mounted rules (those the rules'
// tests check) and scrapes the long-running services of our binaries; promtool accepts it.
func TestComposePrometheus(t *testing.T) {
	t.Parallel()
	svc := service(t, "prometheus")
	conf := mountOf(t, "prometheus", PrometheusConfigFile)
	assert.Equal(t, "/etc/prometheus/prometheus.yml", conf, "the image's configuration path")
	assert.Contains(t, svc.Command, "--config.file="+conf)
	assert.Contains(t, svc.Command, "--storage.tsdb.path=/prometheus", "the image's data volume")

	c, err := LoadPrometheusConfig(root)
	require.NoError(t, err)
	rules := mountOf(t, "prometheus", filepath.ToSlash(filepath.Join("deploy", rulesDir, rulesFile)))
	var loaded []string
	for _, f := range c.RuleFiles {
		if !path.IsAbs(f) {
			f = path.Join(path.Dir(conf), f)
		}
		loaded = append(loaded, f)
	}
	assert.Equal(t, []string{rules}, loaded, "Prometheus loads the mounted rules, relative to its configuration")
	interval, err := time.ParseDuration(c.Global.ScrapeInterval)
	require.NoError(t, err, "scrape_interval")
	assert.LessOrEqual(t, interval, 15*time.Second, "a scrape at least every 15 s: the rules' shortest window is 5m")

	// One job per long-running service of our binaries, named after it (the binaries'
	// compose tests check where each scrapes).
	var want []string
	for binary, sub := range map[string]string{"/walletsvc": "serve", "/notifier": "run"} {
		runs, err := RunsOf(project(t), binary, sub)
		require.NoError(t, err)
		for _, r := range runs {
			if r.Sub == sub {
				want = append(want, r.Name)
			}
		}
	}
	var jobs []string
	for _, j := range c.ScrapeConfigs {
		jobs = append(jobs, j.JobName)
	}
	assert.ElementsMatch(t, want, jobs, "Prometheus's jobs")

	bin := promtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "check", "config", filepath.Join(root, PrometheusConfigFile)).CombinedOutput()
	require.NoError(t, err, "promtool check config:\n%s", out)
}

// Grafana is provisioned from the repository: its Prometheus as the datasource, the
// dashboards of deploy/grafana/dashboards read-only, the SLOs as the home page, viewers
// without a login and nothing fetched from the internet.
func TestComposeGrafana(t *testing.T) {
	t.Parallel()
	e := env(t, "grafana")

	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool `yaml:"isDefault"`
			Editable                     bool
			JSONData                     map[string]any `yaml:"jsonData"`
		}
	}
	dsFile := "deploy/grafana/provisioning/datasources/prometheus.yml"
	readYAML(t, dsFile, &ds)
	assert.Equal(t, "/etc/grafana/provisioning/datasources", path.Dir(mountOf(t, "grafana", dsFile)))
	assert.Equal(t, 1, ds.APIVersion)
	require.Len(t, ds.Datasources, 1)
	d := ds.Datasources[0]
	assert.Equal(t, "prometheus", d.Type)
	assert.Equal(t, "proxy", d.Access, "Grafana's server queries Prometheus, not the browser")
	assert.Equal(t, "http://prometheus:"+onlyTarget(t, "prometheus"), d.URL, "the compose service")
	assert.True(t, d.IsDefault, "the dashboards' datasource variable picks the default")
	assert.False(t, d.Editable)
	c, err := LoadPrometheusConfig(root)
	require.NoError(t, err)
	assert.Equal(t, c.Global.ScrapeInterval, d.JSONData["timeInterval"], "Grafana knows the scrape interval ($__rate_interval)")

	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type string
			DisableDeletion    bool `yaml:"disableDeletion"`
			AllowUIUpdates     bool `yaml:"allowUiUpdates"`
			UpdateInterval     int  `yaml:"updateIntervalSeconds"`
			Options            struct {
				Path                      string
				FoldersFromFilesStructure bool `yaml:"foldersFromFilesStructure"`
			}
		}
	}
	dpFile := "deploy/grafana/provisioning/dashboards/walletsaga.yml"
	readYAML(t, dpFile, &dp)
	assert.Equal(t, "/etc/grafana/provisioning/dashboards", path.Dir(mountOf(t, "grafana", dpFile)))
	require.Len(t, dp.Providers, 1)
	pr := dp.Providers[0]
	assert.Equal(t, "file", pr.Type)
	assert.False(t, pr.AllowUIUpdates, "the repository's JSON is the dashboards' source")
	dashboards := mountOf(t, "grafana", dashboardsDir)
	assert.Equal(t, dashboards, pr.Options.Path, "the provider reads the mounted dashboards")

	home, ok := strings.CutPrefix(e["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"], dashboards+"/")
	if assert.True(t, ok, "the home dashboard is one of the mounted ones") {
		_, err := os.Stat(filepath.Join(root, dashboardsDir, home))
		assert.NoError(t, err, "home dashboard")
		assert.Equal(t, "overview.json", home, "the SLOs")
	}
	assert.Equal(t, "true", e["GF_AUTH_ANONYMOUS_ENABLED"])
	assert.Equal(t, "Viewer", e["GF_AUTH_ANONYMOUS_ORG_ROLE"], "anonymous visitors only view")
	assert.Equal(t, "false", e["GF_USERS_ALLOW_SIGN_UP"])
	assert.NotEmpty(t, e["GF_SECURITY_ADMIN_PASSWORD"], "not the image's admin/admin")
	for _, v := range []string{"GF_PLUGINS_PREINSTALL_DISABLED"} {
		assert.Equal(t, "true", e[v], v)
	}
	for _, v := range []string{"GF_ANALYTICS_REPORTING_ENABLED", "GF_ANALYTICS_CHECK_FOR_UPDATES", "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES", "GF_NEWS_NEWS_FEED_ENABLED"} {
		assert.Equal(t, "false", e[v], v)
	}
}

// readYAML decodes the repository file rel into v, refusing keys v does not have.
func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), rel)
}
