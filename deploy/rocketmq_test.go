package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

	run := func(t *testing.T, failFirst int, existed ...string) (calls []string, stderr string, err error) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "home", "bin"), 0o750))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "path"), 0o750))
		log := filepath.Join(dir, "calls")
		//nolint:gosec // G306: a stand-in executable in the test's temporary directory
		require.NoError(t, os.WriteFile(filepath.Join(dir, "home", "bin", "mqadmin"), []byte(`
printf '%s\n' "$*" >>"$CALLS"
if [ "$1" = createUser ] && [ -n "$EXISTED" ]; then
	echo 'org.apache.rocketmq.tools.command.SubCommandException: CreateUserSubCommand command failed: The user is existed'
	exit 0
fi
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
			"EXISTED=" + strings.Join(existed, ""),
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
	// Run again on a broker that has the users: each gets its secret set again, so that a
	// changed secret reaches the broker.
	t.Run("again, on a broker that has the users", func(t *testing.T) {
		t.Parallel()
		calls, stderr, err := run(t, 0, "existed")
		require.NoError(t, err, stderr)
		again := slices.Clone(want[:3])
		for _, u := range []struct{ name, secret string }{{wallet, v["RMQ_WALLET_SECRET"]}, {notifier, v["RMQ_NOTIFIER_SECRET"]}} {
			again = append(again, "createUser "+target+" -u "+u.name+" -p "+u.secret+" -t Normal",
				"updateUser "+target+" -u "+u.name+" -p "+u.secret)
		}
		assert.Equal(t, append(again, want[5:]...), calls)
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
