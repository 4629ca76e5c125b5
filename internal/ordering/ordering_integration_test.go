package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

func TestMain(m *testing.M) {
	ordering.RouteClientLogs(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	os.Exit(m.Run())
}

const (
	numKeys      = 50
	msgsPerKey   = 40
	numProducers = 10
)

// startConsumer creates an orderly consumer of cfg that hands its batches to h, and starts it.
func startConsumer(t *testing.T, cfg ordering.ConsumerConfig, h ordering.Handler) *ordering.OrderlyConsumer {
	t.Helper()
	c, err := ordering.NewOrderlyConsumer(cfg, h)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	return c
}

// stopConsumer stops c, waiting up to 10 s for its handler and shutdown, and requires a clean
// stop.
func stopConsumer(t *testing.T, c *ordering.OrderlyConsumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Stop(ctx))
}

// tally counts, per key, what a consumer saw against what was produced 1..msgsPerKey.
type tally struct {
	mu    sync.Mutex
	seen  map[string][]int
	added wait.Signal // raised after each add
}

func newTally() *tally { return &tally{seen: map[string][]int{}} }

func (t *tally) add(key string, seq int) {
	t.mu.Lock()
	t.seen[key] = append(t.seen[key], seq)
	t.mu.Unlock()
	t.added.Raise()
}

// distinct reports how many distinct (key, seq) were seen.
func (t *tally) distinct() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.seen {
		u := map[int]bool{}
		for _, v := range s {
			u[v] = true
		}
		n += len(u)
	}
	return n
}

// counts returns lost (never seen), duplicated (seen again after first) and out-of-order
// (a first delivery whose seq is lower than a seq delivered before it) counts, and the number
// of keys with at least one inversion.
func (t *tally) counts() (lost, dup, ooo, keysBroken int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := 0; k < numKeys; k++ {
		s := t.seen[key(k)]
		first := map[int]bool{}
		maxSeen, broken := 0, false
		for _, v := range s {
			if first[v] {
				dup++
				continue
			}
			first[v] = true
			if v < maxSeen {
				ooo++
				broken = true
			}
			if v > maxSeen {
				maxSeen = v
			}
		}
		lost += msgsPerKey - len(first)
		if broken {
			keysBroken++
		}
	}
	return
}

func key(k int) string { return "user-" + strconv.Itoa(k) }

func body(k, seq int) []byte { return []byte(fmt.Sprintf("%s:%d", key(k), seq)) }

func parseBody(b []byte) (string, int) {
	s := string(b)
	i := strings.LastIndexByte(s, ':')
	n, _ := strconv.Atoi(s[i+1:])
	return s[:i], n
}

// produce sends numKeys × msgsPerKey messages from numProducers goroutines: each key belongs
// to one goroutine, which sends its keys' messages interleaved, each key in sequence.
func produce(t *testing.T, send func(k, seq int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, numProducers)
	for g := 0; g < numProducers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for seq := 1; seq <= msgsPerKey; seq++ {
				for k := g; k < numKeys; k += numProducers {
					if err := send(k, seq); err != nil {
						errs <- fmt.Errorf("key %d seq %d: %w", k, seq, err)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestOrderedRoundTrip(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-ordered"), rmqtest.Unique("it-ordered-group")
	b.CreateTopic(t, topic, 8)

	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks

	queueOf := sync.Map{} // key -> queue id: one key must stay on one queue
	start := time.Now()
	produce(t, func(k, seq int) error {
		res, err := p.SendOrderly(context.Background(), ordering.Message{
			Topic: topic, ShardingKey: key(k), Tag: "test", Keys: []string{fmt.Sprintf("%s:%d", key(k), seq)}, Body: body(k, seq),
		})
		if err != nil {
			return err
		}
		if q, loaded := queueOf.LoadOrStore(k, res.QueueID); loaded && q.(int) != res.QueueID {
			return fmt.Errorf("key %d moved from queue %d to %d", k, q, res.QueueID)
		}
		return nil
	})
	sendDur := time.Since(start)

	got := newTally()
	var batches, maxBatch atomic.Int64
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic,
		FromFirstOffset: true, SuspendDelay: 100 * time.Millisecond, BatchSize: 16,
	}, func(_ context.Context, batch []ordering.Delivery) error {
		batches.Add(1)
		if n := int64(len(batch)); n > maxBatch.Load() {
			maxBatch.Store(n)
		}
		for i, d := range batch {
			k, seq := parseBody(d.Body)
			if d.ShardingKey != k {
				t.Errorf("delivery of %s carries sharding key %q", k, d.ShardingKey)
			}
			if d.QueueID != batch[0].QueueID || (i > 0 && d.QueueOffset <= batch[i-1].QueueOffset) {
				t.Errorf("a batch mixes queues or goes back in offsets")
			}
			got.add(k, seq)
		}
		return nil
	})
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, c.Start(t.Context()))
	wait.On(t, 90*time.Second, "every message", got.added.Next, func() bool { return got.distinct() == numKeys*msgsPerKey })
	recvDur := time.Since(start)
	stopConsumer(t, c)

	lost, dup, ooo, _ := got.counts()
	queues := map[int]int{}
	queueOf.Range(func(_, q any) bool { queues[q.(int)]++; return true })
	t.Logf("ordered round trip on broker %s (name server %s), topic %s, 8 queues: keys=%d msgs=%d sent_in=%s received_in=%s lost=%d duplicated=%d out_of_order=%d keys_per_queue=%v batches=%d largest_batch=%d",
		b.BrokerAddr, b.Namesrv, topic, numKeys, numKeys*msgsPerKey, sendDur.Round(time.Millisecond), recvDur.Round(time.Millisecond), lost, dup, ooo, queues,
		batches.Load(), maxBatch.Load())
	require.Zero(t, lost, "lost")
	require.LessOrEqual(t, maxBatch.Load(), int64(16), "batches are bounded")
	require.Less(t, batches.Load(), int64(numKeys*msgsPerKey), "a backlog comes in batches")
	require.Zero(t, ooo, "out of order")
	require.Zero(t, c.Panics())
}

// TestControlUnorderedBreaksOrder is the control run: the same workload without a sharding
// key (random queues) and consumed concurrently. It measures how often per-key order breaks;
// the number is reported, not asserted, so the difference the product makes is visible.
func TestControlUnorderedBreaksOrder(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-control"), rmqtest.Unique("it-control-group")
	b.CreateTopic(t, topic, 8)

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{b.Namesrv}), producer.WithGroupName(rmqtest.Unique("it-control-producer")),
		producer.WithCredentials(primitive.Credentials{AccessKey: b.Credentials.AccessKey, SecretKey: b.Credentials.SecretKey}))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	produce(t, func(k, seq int) error {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body(k, seq)))
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("status %d", res.Status)
		}
		return err
	})

	got := newTally()
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{b.Namesrv}), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumeGoroutineNums(16),
		consumer.WithCredentials(primitive.Credentials{AccessKey: b.Credentials.AccessKey, SecretKey: b.Credentials.SecretKey}))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			k, seq := parseBody(m.Body)
			got.add(k, seq)
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	defer c.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	wait.On(t, 90*time.Second, "every control message", got.added.Next, func() bool { return got.distinct() == numKeys*msgsPerKey })
	lost, dup, ooo, broken := got.counts()
	t.Logf("control run (no key, concurrent consumer) on broker %s: msgs=%d lost=%d duplicated=%d out_of_order=%d keys_with_order_broken=%d/%d",
		b.BrokerAddr, numKeys*msgsPerKey, lost, dup, ooo, broken, numKeys)
	require.Zero(t, lost)
}

// TestAFailedBatchComesAgainAndIsNeverDeadLettered: a handler that fails a batch (its
// database is away) gets the same messages again after the suspend delay, for as long as it
// fails — the client never sends them to the DLQ by itself, however often — then in order; a
// panic is recovered and treated the same way. Other queues go on meanwhile.
func TestAFailedBatchComesAgainAndIsNeverDeadLettered(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-retry"), rmqtest.Unique("it-retry-group")
	b.CreateTopic(t, topic, 8)
	const suspend = 100 * time.Millisecond
	const failures = 20 // far beyond the client's default 16 reconsumes before its DLQ
	var (
		mu       sync.Mutex
		attempts []time.Time
		acked    []string
		panicked bool
		handled  wait.Signal // raised after each call of the handler
	)
	c := startConsumer(t, ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic, FromFirstOffset: true, SuspendDelay: suspend,
	}, func(_ context.Context, batch []ordering.Delivery) error {
		defer handled.Raise()
		mu.Lock()
		defer mu.Unlock()
		if string(batch[0].Body) == "first" && len(attempts) < failures {
			attempts = append(attempts, time.Now())
			return errors.New("database unreachable")
		}
		if string(batch[0].Body) == "first" && !panicked {
			panicked = true
			mu.Unlock()
			defer mu.Lock()
			panic("boom")
		}
		for _, d := range batch {
			acked = append(acked, string(d.Body))
		}
		return nil
	})
	defer stopConsumer(t, c)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-retry-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	for _, name := range []string{"first", "second", "third"} {
		_, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "one-key", Keys: []string{name}, Body: []byte(name)})
		require.NoError(t, err)
	}
	wait.On(t, 60*time.Second, "the batch to be taken at last", handled.Next, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	// Had the client dead-lettered "first" after its own count of reconsumes, it would be
	// missing here.
	require.Equal(t, []string{"first", "second", "third"}, acked, "in order, nothing skipped or dead-lettered")
	minGap := time.Hour
	for i := 1; i < len(attempts); i++ {
		minGap = min(minGap, attempts[i].Sub(attempts[i-1]))
	}
	require.GreaterOrEqual(t, minGap, suspend-20*time.Millisecond, "each retry waits for the suspend delay")
	require.EqualValues(t, 1, c.Panics())
	t.Logf("failed batch on broker %s: failures=%d then a panic, suspend=%s, smallest gap %s, then acknowledged in order",
		b.BrokerAddr, failures, suspend, minGap.Round(time.Millisecond))
}

// TestHandlerDeadlineAndShutdownWaitsForTheHandler: each handler call carries a deadline
// (HandlerTimeout), and Shutdown does not return while a handler is still running.
func TestHandlerDeadlineAndShutdownWaitsForTheHandler(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-shutdown"), rmqtest.Unique("it-shutdown-group")
	b.CreateTopic(t, topic, 8)
	entered, release := make(chan time.Duration, 1), make(chan struct{})
	var finished atomic.Bool
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic,
		FromFirstOffset: true, HandlerTimeout: 7 * time.Second},
		func(ctx context.Context, _ []ordering.Delivery) error {
			dl, ok := ctx.Deadline()
			if !ok {
				entered <- -1
			} else {
				entered <- time.Until(dl)
			}
			<-release
			finished.Store(true)
			return nil
		})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-shutdown-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	_, err = p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "k", Body: []byte("slow")})
	require.NoError(t, err)

	var left time.Duration
	select {
	case left = <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the handler was never called")
	}
	require.Greater(t, left, 5*time.Second, "the handler's context carries the deadline")
	require.LessOrEqual(t, left, 7*time.Second)

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- c.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while the handler was running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-stopped)
	require.True(t, finished.Load(), "the handler in flight finished before Shutdown returned")
}

// TestAnAddedQueueIsTakenAtOnce: when a topic grows, the producer sends to the new queues and
// the consumer rebalances onto them as soon as their route polls show the change, instead of
// on the client's own timers (a 30 s route poll, a 20 s rebalance). A message the producer
// put on a new queue is consumed within the rebalance timer's period, which only the
// immediate rebalance on a route change can do.
func TestAnAddedQueueIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-grow"), rmqtest.Unique("it-grow-group")
	b.CreateTopic(t, topic, 2)
	got := sync.Map{}
	var stored wait.Signal // raised after each batch the handler stored
	c := startConsumer(t, ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic, FromFirstOffset: true, RoutePoll: 200 * time.Millisecond,
	}, func(_ context.Context, batch []ordering.Delivery) error {
		for _, d := range batch {
			got.Store(string(d.Body), d.QueueID)
		}
		stored.Raise()
		return nil
	})
	defer stopConsumer(t, c)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-grow-producer"), RoutePoll: 200 * time.Millisecond})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	_, err = p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "before", Body: []byte("before")})
	require.NoError(t, err)
	wait.On(t, 60*time.Second, "the first message", stored.Next, func() bool { _, ok := got.Load("before"); return ok })

	b.CreateTopic(t, topic, 8) // the route now has 8 queues
	grown := time.Now()
	var body string
	sends := 0
	wait.Until(t, 10*time.Second, "the producer to send to an added queue", func() bool {
		for range 64 {
			sends++
			key := "after-" + strconv.Itoa(sends) // each send its own body
			res, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: key, Body: []byte(key)})
			require.NoError(t, err)
			if res.QueueID >= 2 {
				body = key
				return true
			}
		}
		return false
	})
	sent := time.Since(grown)
	// 15 s is within the 20 s rebalance timer started with the consumer a moment ago, so the
	// message can only come through the rebalance the route change triggered.
	wait.On(t, 15*time.Second, "the message on the added queue", stored.Next, func() bool { _, ok := got.Load(body); return ok })
	q, _ := got.Load(body)
	t.Logf("topic grown from 2 to 8 queues on broker %s: the producer used an added queue %s after, the consumer took queue %d's message %s after",
		b.BrokerAddr, sent.Round(time.Millisecond), q, time.Since(grown).Round(time.Millisecond))
}

// TestABacklogIsPulledWithoutThePullWait: a consumer with a pull wait waits it only after a
// pull that brought everything its queue held; while messages are left behind it pulls
// again at once. A backlog of five batches on one queue is consumed within less than twice
// the wait: waiting after each pull, as the client did, takes at least four waits.
func TestABacklogIsPulledWithoutThePullWait(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	const batch, batches, pullWait = 4, 5, time.Second
	topic, group := rmqtest.Unique("it-backlog"), rmqtest.Unique("it-backlog-group")
	b.CreateTopic(t, topic, 1)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-backlog-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	for i := range batch * batches {
		_, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "user", Body: []byte(strconv.Itoa(i))})
		require.NoError(t, err)
	}

	var (
		mu          sync.Mutex
		got         []string
		first, last time.Time
		stored      wait.Signal
	)
	c := startConsumer(t, ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic, FromFirstOffset: true,
		BatchSize: batch, PullWait: pullWait,
	}, func(_ context.Context, ds []ordering.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		last = time.Now()
		for _, d := range ds {
			got = append(got, string(d.Body))
		}
		stored.Raise()
		return nil
	})
	defer stopConsumer(t, c)
	wait.On(t, 60*time.Second, "the backlog", stored.Next, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= batch*batches
	})
	mu.Lock()
	defer mu.Unlock()
	want := make([]string, 0, batch*batches)
	for i := range batch * batches {
		want = append(want, strconv.Itoa(i))
	}
	require.Equal(t, want, got, "the backlog, in order and once")
	require.Less(t, last.Sub(first), 2*pullWait, "the backlog's %d batches came over %s: it waited between pulls", batches, last.Sub(first))
	t.Logf("%d messages in batches of %d, pull wait %s: consumed over %s", len(got), batch, pullWait, last.Sub(first).Round(time.Millisecond))
}

// TestAGroupThatStartsAtTheEndTakesEveryQueue: a consumer group that already has offsets on
// some of a topic's queues, consumed by a notifier that starts at the end of the topic
// (CONSUME_FROM=last) and signs as a user with the notifier's rights. For a queue the group
// has no offset on, the consumer asks the broker for the queue's last offset; the broker
// refused that to a user allowed only to subscribe, and the client took no queue it could
// not find a start for: those queues were never consumed. Every queue must be held, and a
// message sent to each must arrive.
func TestAGroupThatStartsAtTheEndTakesEveryQueue(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	const queues = 4
	topic, group := rmqtest.Unique("it-last"), rmqtest.Unique("it-last-group")
	b.CreateTopic(t, topic, queues)
	creds := b.NotifierUser(t, topic, group)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-last-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	// sendTo sends one message to each of the given queues and returns their bodies.
	hash, err := ordering.ParseKeyHash("")
	require.NoError(t, err)
	sends := 0
	sendTo := func(want map[int]bool) map[string]int {
		bodies := map[string]int{}
		for len(bodies) < len(want) {
			sends++
			require.Less(t, sends, 10_000, "no key lands on the queues %v", want)
			key := "k-" + strconv.Itoa(sends)
			q := hash.Slot(key, queues) // one broker: the slot is the queue id
			if !want[q] || slices.Contains(slices.Collect(maps.Values(bodies)), q) {
				continue
			}
			res, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: key, Body: []byte(key)})
			require.NoError(t, err)
			require.Equal(t, q, res.QueueID)
			bodies[key] = q
		}
		return bodies
	}
	// consume stores what it takes in got, and raises stored after each batch.
	consume := func(fromFirst bool, got *sync.Map, stored *wait.Signal) *ordering.OrderlyConsumer {
		return startConsumer(t, ordering.ConsumerConfig{
			Namesrv: []string{b.Namesrv}, Credentials: creds, Group: group, Topic: topic, FromFirstOffset: fromFirst, RoutePoll: 200 * time.Millisecond,
		}, func(_ context.Context, batch []ordering.Delivery) error {
			for _, d := range batch {
				got.Store(string(d.Body), d.QueueID)
			}
			stored.Raise()
			return nil
		})
	}

	// The group's offsets: a first consumer takes a message on queues 0 and 1, and commits
	// where it stopped there when it shuts down. Queues 2 and 3 have none.
	var first sync.Map
	var firstStored wait.Signal
	c1 := consume(true, &first, &firstStored)
	early := sendTo(map[int]bool{0: true, 1: true})
	wait.On(t, 60*time.Second, "the first consumer's messages", firstStored.Next, func() bool {
		for body := range early {
			if _, ok := first.Load(body); !ok {
				return false
			}
		}
		return true
	})
	stopConsumer(t, c1)

	var got sync.Map
	var gotStored wait.Signal
	c2 := consume(false, &got, &gotStored)
	defer stopConsumer(t, c2)
	wait.Until(t, 60*time.Second, "the consumer that starts at the end to hold every queue", func() bool {
		held, all := c2.Assignment()
		return held == queues && all == queues
	})
	late := sendTo(map[int]bool{0: true, 1: true, 2: true, 3: true})
	wait.On(t, 30*time.Second, "a message on every queue", gotStored.Next, func() bool {
		for body := range late {
			if _, ok := got.Load(body); !ok {
				return false
			}
		}
		return true
	})
	for body := range early {
		_, again := got.Load(body)
		require.False(t, again, "%s was consumed before the group's offset", body)
	}
}

// TestStartAtEndPlacesEachQueueWithoutAnOffset: StartAtEnd decides, queue by queue, where a
// queue the group has no offset on starts (client patch 17), given the queues the consumer
// read at its start. Of a topic's three queues, each holding a message from before the group,
// the two it starts at their end deliver only what comes after (a queue's first batch marked
// FirstAtEnd, the next not), the other its first message on. A start at the end is
// committed at once: a second consumer of the group, started once the first stopped, resumes
// at its start the queue the first placed at its end and consumed nothing from, instead of
// asking again (and starting it at an end that moved past what came meanwhile).
func TestStartAtEndPlacesEachQueueWithoutAnOffset(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	const queues = 3
	topic, group := rmqtest.Unique("it-start"), rmqtest.Unique("it-start-group")
	b.CreateTopic(t, topic, queues)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-start-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	hash, err := ordering.ParseKeyHash("")
	require.NoError(t, err)
	keyOn := map[int]string{}
	for i := 0; len(keyOn) < queues; i++ {
		k := "k-" + strconv.Itoa(i)
		if _, ok := keyOn[hash.Slot(k, queues)]; !ok {
			keyOn[hash.Slot(k, queues)] = k
		}
	}
	send := func(queue int, body string) (broker string) {
		res, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: keyOn[queue], Body: []byte(body)})
		require.NoError(t, err)
		require.Equal(t, queue, res.QueueID)
		return res.Broker
	}
	// The consumer's StartAtEnd reads broker while the test sends: it is set once, here.
	broker := send(0, "end-before")
	send(1, "first-before")
	send(2, "quiet-before")
	q := func(id int) string { return broker + "/" + strconv.Itoa(id) }
	all := []string{q(0), q(1), q(2)}

	type got struct {
		body  string
		first bool
	}
	var (
		mu      sync.Mutex
		bodies  []got
		asked   []string
		seen    [][]string
		stored  wait.Signal
		started wait.Signal
	)
	consume := func() *ordering.OrderlyConsumer {
		return startConsumer(t, ordering.ConsumerConfig{
			Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic,
			StartAtEnd: func(queue string, atStart []string) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				asked, seen = append(asked, queue), append(seen, atStart)
				started.Raise()
				return queue != q(1), nil
			},
		}, func(_ context.Context, batch []ordering.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range batch {
				bodies = append(bodies, got{string(d.Body), d.FirstAtEnd})
			}
			stored.Raise()
			return nil
		})
	}
	has := func(body string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(bodies, func(g got) bool { return g.body == body })
	}
	c1 := consume()
	wait.On(t, 60*time.Second, "every queue placed", started.Next, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) >= queues
	})
	wait.On(t, 30*time.Second, "the message from before the group on the queue started at its first message", stored.Next,
		func() bool { return has("first-before") })
	wait.Until(t, 30*time.Second, "the consumer to hold every queue", func() bool { held, _ := c1.Assignment(); return held == queues })
	send(0, "end-1")
	wait.On(t, 30*time.Second, "the first message after the start at the end", stored.Next, func() bool { return has("end-1") })
	send(0, "end-2")
	wait.On(t, 30*time.Second, "the next one", stored.Next, func() bool { return has("end-2") })
	stopConsumer(t, c1)

	// Queue 2 was placed at its end and nothing came since: only the start's commit gave it
	// an offset.
	send(2, "quiet-1")
	mu.Lock()
	askedByFirst := slices.Clone(asked)
	mu.Unlock()
	c2 := consume()
	defer stopConsumer(t, c2)
	wait.On(t, 60*time.Second, "the second consumer to resume where the first placed the quiet queue", stored.Next, func() bool { return has("quiet-1") })

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []got{{"first-before", false}, {"end-1", true}, {"end-2", false}, {"quiet-1", false}}, bodies,
		"nothing from before a start at the end; a queue's first batch after it marked, and only that one")
	// The client asks again before a queue's first pull unless the broker has its offset by
	// then: a queue started at its first message, or one whose commit was still on its way.
	placed := slices.Clone(askedByFirst)
	slices.Sort(placed)
	require.Equal(t, all, slices.Compact(placed), "the first consumer placed every queue")
	require.Equal(t, askedByFirst, asked, "the second found an offset on every queue")
	for _, s := range seen {
		require.ElementsMatch(t, all, s, "the queues read at the start")
	}
}
