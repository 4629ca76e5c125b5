package ordering_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
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
	"github.com/walletsaga/walletsaga/internal/rmqtest"
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

// tally counts, per key, what a consumer saw against what was produced 1..msgsPerKey.
type tally struct {
	mu   sync.Mutex
	seen map[string][]int
}

func newTally() *tally { return &tally{seen: map[string][]int{}} }

func (t *tally) add(key string, seq int) {
	t.mu.Lock()
	t.seen[key] = append(t.seen[key], seq)
	t.mu.Unlock()
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.seen {
		n += len(s)
	}
	return n
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

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOrderedRoundTrip(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-ordered"), rmqtest.Unique("it-ordered-group")
	b.CreateTopic(t, topic, 8)

	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck

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
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Group: group, Topic: topic,
		MaxReconsumeTimes: 3, FromFirstOffset: true, SuspendDelay: 100 * time.Millisecond,
	}, func(_ context.Context, d ordering.Delivery) ordering.Result {
		k, seq := parseBody(d.Body)
		if d.ShardingKey != k {
			t.Errorf("delivery of %s carries sharding key %q", k, d.ShardingKey)
		}
		got.add(k, seq)
		return ordering.Ack()
	})
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, c.Start())
	waitFor(t, 90*time.Second, "every message", func() bool { return got.distinct() == numKeys*msgsPerKey })
	recvDur := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Shutdown(ctx))

	lost, dup, ooo, _ := got.counts()
	queues := map[int]int{}
	queueOf.Range(func(_, q any) bool { queues[q.(int)]++; return true })
	t.Logf("ordered round trip on broker %s (name server %s), topic %s, 8 queues: keys=%d msgs=%d sent_in=%s received_in=%s lost=%d duplicated=%d out_of_order=%d keys_per_queue=%v",
		b.BrokerAddr, b.Namesrv, topic, numKeys, numKeys*msgsPerKey, sendDur.Round(time.Millisecond), recvDur.Round(time.Millisecond), lost, dup, ooo, queues)
	require.Zero(t, lost, "lost")
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

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{b.Namesrv}), producer.WithGroupName(rmqtest.Unique("it-control-producer")))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown() //nolint:errcheck
	produce(t, func(k, seq int) error {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body(k, seq)))
		if err == nil && res.Status != primitive.SendOK {
			err = fmt.Errorf("status %d", res.Status)
		}
		return err
	})

	got := newTally()
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{b.Namesrv}), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumeGoroutineNums(16))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			k, seq := parseBody(m.Body)
			got.add(k, seq)
		}
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	defer c.Shutdown() //nolint:errcheck
	waitFor(t, 90*time.Second, "every control message", func() bool { return got.distinct() == numKeys*msgsPerKey })
	lost, dup, ooo, broken := got.counts()
	t.Logf("control run (no key, concurrent consumer) on broker %s: msgs=%d lost=%d duplicated=%d out_of_order=%d keys_with_order_broken=%d/%d",
		b.BrokerAddr, numKeys*msgsPerKey, lost, dup, ooo, broken, numKeys)
	require.Zero(t, lost)
}

// TestRetriesThenDeadLetter: a handler that always fails, with MaxReconsumeTimes bounded,
// ends with the message in %DLQ%<group>, and the next message of the same key (same queue)
// is then consumed. It logs the attempts and suspend intervals it observed.
func TestRetriesThenDeadLetter(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-dlq"), rmqtest.Unique("it-dlq-group")
	b.CreateTopic(t, topic, 8)
	const maxReconsume = 2
	const suspend = 300 * time.Millisecond

	var (
		mu         sync.Mutex
		poisonAt   []time.Time
		nextAt     time.Time
		nextQueue  = -1
		poisonQ    = -1
		afterCount int
	)
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Group: group, Topic: topic,
		MaxReconsumeTimes: maxReconsume, FromFirstOffset: true, SuspendDelay: suspend,
	}, func(_ context.Context, d ordering.Delivery) ordering.Result {
		mu.Lock()
		defer mu.Unlock()
		switch string(d.Body) {
		case "poison":
			poisonAt = append(poisonAt, time.Now())
			poisonQ = d.QueueID
			return ordering.RetryAfter(0)
		case "next":
			if nextAt.IsZero() {
				nextAt = time.Now()
			}
			nextQueue = d.QueueID
			afterCount = len(poisonAt)
		}
		return ordering.Ack()
	})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Shutdown(ctx))
	}()

	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-dlq-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck
	poison, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "user-7", Keys: []string{"poison-key"}, Body: []byte("poison")})
	require.NoError(t, err)
	next, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "user-7", Keys: []string{"next-key"}, Body: []byte("next")})
	require.NoError(t, err)
	require.Equal(t, poison.QueueID, next.QueueID, "same key, same queue")

	waitFor(t, 60*time.Second, "the next message after the poisoned one", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !nextAt.IsZero()
	})
	dlq := b.ReadDLQ(t, group, 60*time.Second, func(ms []rmqtest.DLQMessage) bool {
		for _, m := range ms {
			if rmqtest.HasKey(m.Keys, "poison-key") {
				return true
			}
		}
		return false
	})
	var found *rmqtest.DLQMessage
	for i := range dlq {
		if rmqtest.HasKey(dlq[i].Keys, "poison-key") {
			found = &dlq[i]
		}
		require.False(t, rmqtest.HasKey(dlq[i].Keys, "next-key"), "the healthy message must not be dead-lettered")
	}
	require.NotNil(t, found, "poisoned message in %%DLQ%%%s", group)
	require.Equal(t, "poison", string(found.Body))

	mu.Lock()
	defer mu.Unlock()
	var gaps []string
	minGap := time.Hour
	for i := 1; i < len(poisonAt); i++ {
		g := poisonAt[i].Sub(poisonAt[i-1])
		gaps = append(gaps, g.Round(time.Millisecond).String())
		if g < minGap {
			minGap = g
		}
	}
	t.Logf("dead-letter on broker %s: MaxReconsumeTimes=%d handler_attempts=%d suspend_requested=%s observed_gaps=%v next_message_after=%s same_queue=%v dlq_topic=%%DLQ%%%s dlq_msg_id=%s origin_msg_id=%s",
		b.BrokerAddr, maxReconsume, len(poisonAt), suspend, gaps, nextAt.Sub(poisonAt[len(poisonAt)-1]).Round(time.Millisecond), nextQueue == poisonQ, group, found.MsgID, found.OriginMsgID)
	require.Equal(t, poisonQ, nextQueue)
	require.Equal(t, afterCount, len(poisonAt), "no attempt of the poisoned message after the next one was consumed")
	// The Go client compares ReconsumeTimes > max, so it calls the handler max+2 times.
	require.GreaterOrEqual(t, len(poisonAt), maxReconsume+1)
	require.LessOrEqual(t, len(poisonAt), maxReconsume+2)
	require.GreaterOrEqual(t, minGap, suspend-20*time.Millisecond, "each retry waits for the suspend delay")
}

// TestWaitDoesNotSpendAttempts: Wait suspends without consuming the client's attempts, so a
// message waiting longer than MaxReconsumeTimes suspends is not dead-lettered; DeadLetter
// sends a message to the DLQ at once; a panic is recovered and the message retried.
func TestWaitDeadLetterAndPanic(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	topic, group := rmqtest.Unique("it-wait"), rmqtest.Unique("it-wait-group")
	b.CreateTopic(t, topic, 8)
	var (
		mu       sync.Mutex
		calls    = map[string]int{}
		acked    []string
		panicked bool
	)
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: []string{b.Namesrv}, Group: group, Topic: topic,
		MaxReconsumeTimes: 1, FromFirstOffset: true, SuspendDelay: 50 * time.Millisecond,
	}, func(_ context.Context, d ordering.Delivery) ordering.Result {
		mu.Lock()
		defer mu.Unlock()
		name := string(d.Body)
		calls[name]++
		switch {
		case name == "waits" && calls[name] <= 5:
			return ordering.Wait(20 * time.Millisecond)
		case name == "dead":
			return ordering.DeadLetter()
		case name == "panics" && !panicked:
			panicked = true
			mu.Unlock()
			defer mu.Lock()
			panic("boom")
		}
		acked = append(acked, name)
		return ordering.Ack()
	})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Shutdown(ctx))
	}()
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-wait-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck
	for _, name := range []string{"waits", "dead", "panics", "last"} {
		_, err := p.SendOrderly(context.Background(), ordering.Message{Topic: topic, ShardingKey: "one-key", Keys: []string{name}, Body: []byte(name)})
		require.NoError(t, err)
	}
	waitFor(t, 60*time.Second, "the last message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 0 && acked[len(acked)-1] == "last"
	})
	dlq := b.ReadDLQ(t, group, 60*time.Second, func(ms []rmqtest.DLQMessage) bool {
		for _, m := range ms {
			if rmqtest.HasKey(m.Keys, "dead") {
				return true
			}
		}
		return false
	})
	var keys []string
	for _, m := range dlq {
		keys = append(keys, m.Keys)
	}
	sort.Strings(keys)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"waits", "panics", "last"}, acked, "in order, the waiting one not dead-lettered")
	require.Equal(t, 6, calls["waits"], "5 waits then an ack")
	require.Equal(t, 1, calls["dead"])
	require.Equal(t, []string{"dead"}, keys, "only the dead-lettered message is in the DLQ")
	require.EqualValues(t, 1, c.Panics())
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
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{Namesrv: []string{b.Namesrv}, Group: group, Topic: topic,
		MaxReconsumeTimes: 3, FromFirstOffset: true, HandlerTimeout: 7 * time.Second},
		func(ctx context.Context, d ordering.Delivery) ordering.Result {
			dl, ok := ctx.Deadline()
			if !ok {
				entered <- -1
			} else {
				entered <- time.Until(dl)
			}
			<-release
			finished.Store(true)
			return ordering.Ack()
		})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("it-shutdown-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck
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
		stopped <- c.Shutdown(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) while the handler was running", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-stopped)
	require.True(t, finished.Load(), "the handler in flight finished before Shutdown returned")
}
