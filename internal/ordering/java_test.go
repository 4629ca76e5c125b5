package ordering_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// javaCheck runs testdata/SelectorCheck.java, compiled at test time against the RocketMQ
// broker distribution's jars (the real client's SelectMessageQueueByHash and route code).
type javaCheck struct {
	java, classpath, home string
}

// rocketmqLib is where scripts/services.sh keeps the broker distribution's jars.
func rocketmqLib() string {
	if d := os.Getenv("RMQ_LIB"); d != "" {
		return d
	}
	run := os.Getenv("WALLETSAGA_RUN_DIR")
	if run == "" {
		run = filepath.Join("..", "..", ".run")
	}
	return filepath.Join(run, "rocketmq", "lib")
}

// requireJava compiles SelectorCheck into a temporary directory. A missing JDK or client jar
// fails the test under make test and CI, and skips it otherwise (and under -short).
func requireJava(t *testing.T) javaCheck {
	t.Helper()
	testenv.SkipIfShort(t, "a JDK and the RocketMQ client jar")
	javac, err := exec.LookPath("javac")
	if err != nil {
		testenv.Unavailable(t, "javac (JDK 17+)", "PATH", err)
		return javaCheck{}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Unavailable(t, "java (JDK 17+)", "PATH", err)
		return javaCheck{}
	}
	lib := rocketmqLib()
	if jars, _ := filepath.Glob(filepath.Join(lib, "rocketmq-client-*.jar")); len(jars) == 0 {
		testenv.Unavailable(t, "the RocketMQ client jar", lib, errors.New("no rocketmq-client-*.jar there (scripts/services.sh resolves it)"))
		return javaCheck{}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, javac, "-d", dir, "-cp", filepath.Join(lib, "*"), filepath.Join("testdata", "SelectorCheck.java")).CombinedOutput()
	require.NoErrorf(t, err, "javac: %s", out)
	return javaCheck{java: java, classpath: dir + string(os.PathListSeparator) + filepath.Join(lib, "*"), home: dir}
}

// run runs SelectorCheck with args, one stdin line per input, and returns its output lines.
func (j javaCheck) run(t *testing.T, input []string, args ...string) []string {
	return j.runSigned(t, ordering.Credentials{}, input, args...)
}

// runSigned is run with the Java producer signing as creds (zero: unsigned).
func (j javaCheck) runSigned(t *testing.T, creds ordering.Credentials, input []string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// user.home keeps the client's logs in the test's directory; with the broker's jars on
	// the classpath the client would pick the broker's logging configuration.
	cmd := exec.CommandContext(ctx, j.java, append([]string{"-Duser.home=" + j.home, "-Dfile.encoding=UTF-8",
		"-Drmq.logback.configurationFile=rmq.client.logback.xml",
		"-Xmx256m", "-XX:+UseSerialGC", "-cp", j.classpath, "SelectorCheck"}, args...)...)
	cmd.Stdin = strings.NewReader(strings.Join(input, "\n") + "\n")
	cmd.Env = append(os.Environ(), "ROCKETMQ_ACCESS_KEY="+creds.AccessKey, "ROCKETMQ_SECRET_KEY="+creds.SecretKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoErrorf(t, cmd.Run(), "SelectorCheck %v: %s", args, stderr.String())
	var answers []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if a, ok := strings.CutPrefix(line, "= "); ok {
			answers = append(answers, a)
		} else if line == "=" {
			answers = append(answers, "")
		}
	}
	return answers
}

// testKeys are decimal user ids 1..n, random ids (large int64s of both signs), the extremes,
// and a few non-decimal keys (a Java producer may key by any String).
func testKeys(n int) []string {
	var keys []string
	for i := 1; i <= n; i++ {
		keys = append(keys, strconv.Itoa(i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		keys = append(keys, strconv.FormatInt(rng.Int64(), 10), strconv.FormatInt(-rng.Int64N(math.MaxInt64), 10),
			strconv.FormatInt(rng.Int64N(1<<40), 10))
	}
	keys = append(keys, strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10), "0", "11111",
		"", "user-42", "用户", "Ünïcödé", "😀 emoji", "\u00a0nbsp")
	return keys
}

// TestSelectorAgreesWithJavasSelectMessageQueueByHash: for thousands of keys and several
// queue counts, the Go selector picks the queue index the Java client's
// SelectMessageQueueByHash picks.
func TestSelectorAgreesWithJavasSelectMessageQueueByHash(t *testing.T) {
	t.Parallel()
	j := requireJava(t)
	counts := []int{1, 2, 3, 7, 8, 16, 31, 64}
	keys := testKeys(5000)
	var arg []string
	for _, n := range counts {
		arg = append(arg, strconv.Itoa(n))
	}
	got := j.run(t, keys, "hash", strings.Join(arg, ","))
	require.Len(t, got, len(keys))
	sel := ordering.NewQueueSelector(ordering.HashJava)
	lists := map[int][]*primitive.MessageQueue{}
	for _, n := range counts {
		for i := range n {
			lists[n] = append(lists[n], &primitive.MessageQueue{Topic: "t", BrokerName: "broker-a", QueueId: i})
		}
	}
	fnvAgrees, compared := 0, 0
	for k, key := range keys {
		java := strings.Fields(got[k])
		require.Len(t, java, len(counts), "key %q", key)
		msg := primitive.NewMessage("t", nil)
		msg.WithShardingKey(key)
		for c, n := range counts {
			want, err := strconv.Atoi(java[c])
			require.NoError(t, err)
			if slot, sel := ordering.HashJava.Slot(key, n), sel.Select(msg, lists[n], "").QueueId; slot != want || sel != want {
				t.Fatalf("key %q among %d queues: Java picks %d, Slot %d, the selector %d", key, n, want, slot, sel)
			}
			compared++
			if n == 8 && ordering.HashFNV.Slot(key, n) == want {
				fnvAgrees++
			}
		}
	}
	require.Equal(t, len(keys)*len(counts), compared)
	t.Logf("Java's SelectMessageQueueByHash and the Go selector agree on %d keys × queue counts %v; the Go client's FNV selector agreed with Java on %d of the %d keys on 8 queues",
		len(keys), counts, fnvAgrees, len(keys))
}

// TestSelectorOrdersRoutesLikeJava: on routes of several brokers, listed in any order, with
// uneven queue counts, a read-only broker, or broker names that UTF-8 and UTF-16 sort
// differently, the Go selector indexes the same publish list as the Java client
// (MQClientInstance.topicRouteData2TopicPublishInfo) and so picks the same broker and queue.
func TestSelectorOrdersRoutesLikeJava(t *testing.T) {
	t.Parallel()
	j := requireJava(t)
	type queueData struct {
		broker string
		write  int
		perm   int // 6 read-write, 4 read-only
	}
	routes := [][]queueData{
		{{"broker-b", 8, 6}, {"broker-a", 8, 6}},
		{{"broker-b", 4, 6}, {"broker-a", 8, 6}, {"broker-c", 2, 6}},
		{{"broker-a", 8, 6}, {"broker-b", 8, 4}},
		{{"broker-😀", 3, 6}, {"broker-Ａ", 5, 6}},
	}
	keys := testKeys(2000)
	for _, route := range routes {
		var spec []string
		for _, qd := range route {
			spec = append(spec, fmt.Sprintf("%s:%d:%d", qd.broker, qd.write, qd.perm))
		}
		got := j.run(t, append([]string{strings.Join(spec, ",")}, keys...), "route")
		require.Len(t, got, 1+len(keys))

		// The Go client's publish list: queue datas sorted by broker name bytes, writable
		// ones only, each broker's queues 0..write-1.
		qds := slices.Clone(route)
		sort.SliceStable(qds, func(a, b int) bool { return qds[a].broker < qds[b].broker })
		var goList []*primitive.MessageQueue
		for _, qd := range qds {
			if qd.perm&2 == 0 {
				continue
			}
			for i := range qd.write {
				goList = append(goList, &primitive.MessageQueue{Topic: "t", BrokerName: qd.broker, QueueId: i})
			}
		}
		var ours []string
		for _, q := range ordering.InJavaOrder(goList) {
			ours = append(ours, ordering.Queue{Broker: q.BrokerName, ID: q.QueueId}.String())
		}
		require.Equal(t, strings.Fields(got[0]), ours, "route %v: the publish list in Java's order", spec)
		shuffled := slices.Clone(goList)
		rand.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		sel := ordering.NewQueueSelector(ordering.HashJava)
		for k, key := range keys {
			msg := primitive.NewMessage("t", nil)
			msg.WithShardingKey(key)
			for _, list := range [][]*primitive.MessageQueue{goList, shuffled} {
				q := sel.Select(msg, list, "")
				require.Equalf(t, got[1+k], ordering.Queue{Broker: q.BrokerName, ID: q.QueueId}.String(), "route %v, key %q", spec, key)
			}
		}
	}
}

// TestEventsLandWhereJavasProducerPutsThem: on the real broker, a Java producer sending with
// SelectMessageQueueByHash (Spring's syncSendOrderly) and this producer (SendOrderly, and
// SendBatch to the route's QueueOf, as the relay sends) store each key's messages on the
// same queue of the topic.
func TestEventsLandWhereJavasProducerPutsThem(t *testing.T) {
	t.Parallel()
	j := requireJava(t)
	b := rmqtest.Require(t)
	topic := rmqtest.Unique("it-java")
	b.CreateTopic(t, topic, 8)
	var keys []string
	for i := 1; i <= 64; i++ {
		keys = append(keys, strconv.Itoa(i))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 36 {
		keys = append(keys, strconv.FormatInt(rng.Int64(), 10))
	}
	keys = append(keys, "11111")
	javaSaw := j.runSigned(t, b.Credentials, keys, "send", b.Namesrv, topic, rmqtest.Unique("it-java-producer"))
	require.Len(t, javaSaw, len(keys))

	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-go-producer"), Credentials: b.Credentials})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	route, err := p.Route(ctx, topic)
	require.NoError(t, err)
	require.Len(t, route.Queues, 8)
	queues := map[string]bool{}
	for k, key := range keys {
		res, err := p.SendOrderly(ctx, ordering.Message{Topic: topic, ShardingKey: key, Body: []byte(key)})
		require.NoError(t, err)
		stored := ordering.Queue{Broker: res.Broker, ID: res.QueueID}.String()
		require.Equal(t, javaSaw[k], stored, "key %s: Java stored it on %s, SendOrderly on %s", key, javaSaw[k], stored)
		require.Equal(t, javaSaw[k], route.QueueOf(key).String(), "key %s: QueueOf", key)
		batch, err := p.SendBatch(ctx, route.QueueOf(key), []ordering.Message{{Topic: topic, ShardingKey: key, Body: []byte(key)}, {Topic: topic, ShardingKey: key, Body: []byte(key)}})
		require.NoError(t, err)
		require.Equal(t, javaSaw[k], ordering.Queue{Broker: batch[1].Broker, ID: batch[1].QueueID}.String())
		queues[stored] = true
	}
	t.Logf("Java and Go producers on broker %s, topic %s (8 queues): %d keys, each stored on the same queue by both (%d queues used); user 1 on %s, 42 on %s, 11111 on %s",
		b.BrokerAddr, topic, len(keys), len(queues), javaSaw[0], javaSaw[41], javaSaw[len(keys)-1])
	_, err = p.SendBatch(ctx, ordering.Queue{Broker: route.Queues[0].Broker, ID: 99}, []ordering.Message{{Topic: topic, ShardingKey: "1", Body: []byte("x")}})
	require.Error(t, err, "a queue the route does not have")
}
