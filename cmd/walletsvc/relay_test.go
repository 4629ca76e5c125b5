package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestMain(m *testing.M) {
	// The RocketMQ client logs process-wide; the tests' own clients keep to errors.
	ordering.RouteClientLogs(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	os.Exit(m.Run())
}

// relayStack is the relay as walletsvc wires it, on the real Postgres (a database of the
// test's own) and the real broker (a topic of its own), with an orderly consumer that
// records what arrives.
type relayStack struct {
	t        *testing.T
	pool     *pgxpool.Pool
	broker   rmqtest.Broker
	topic    string
	producer *ordering.OrderedProducer
	outbox   *wallet.OutboxFeed
	marked   wait.Signal // raised after each statement that marks events published
	got      *arrivals
}

func newRelayStack(t *testing.T, queues int, hash ordering.KeyHash) *relayStack {
	t.Helper()
	b := rmqtest.Require(t)
	pool, _ := testdb.New(t)
	s := &relayStack{t: t, pool: pool, broker: b, topic: rmqtest.Unique("relay-events"), got: &arrivals{seqs: map[int64][]int64{}, queues: map[int64]map[string]bool{}},
		outbox: wallet.NewOutboxFeed(wallet.NewOutboxStore(pool, 7421, 50*time.Millisecond))}
	b.CreateTopic(t, s.topic, queues)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Group: rmqtest.Unique("relay-producer"), Hash: hash, Credentials: b.Credentials})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown() })
	s.producer = p
	binarytest.StartConsumer(t, b, s.topic, s.got.handle)
	return s
}

// users creates n users with wallets.
func (s *relayStack) users(n int) []int64 {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `
WITH u AS (INSERT INTO users (name, phone) SELECT 'user ' || g, '+8613800138000' FROM generate_series(1, $1) g RETURNING id)
INSERT INTO wallets (user_id) SELECT id FROM u RETURNING user_id`, n)
	require.NoError(s.t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(s.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(s.t, rows.Err())
	return ids
}

// write commits user's next n events (seqs after its last), one transaction.
func (s *relayStack) write(user int64, n int) {
	s.t.Helper()
	require.NoError(s.t, s.tryWrite(user, n))
}

// writeEach writes n events for each user, one transaction each, and returns how many each
// has.
func (s *relayStack) writeEach(users []int64, n int) map[int64]int {
	s.t.Helper()
	want := map[int64]int{}
	for _, u := range users {
		s.write(u, n)
		want[u] = n
	}
	return want
}

// route is the topic's route as the producer reads it.
func (s *relayStack) route() ordering.Route {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	route, err := s.producer.Route(ctx, s.topic)
	require.NoError(s.t, err)
	return route
}

// writeAll writes n events for each user, from several goroutines (each user's in one).
func (s *relayStack) writeAll(users []int64, n int) {
	s.t.Helper()
	const writers = 5
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for k := g; k < len(users); k += writers {
				if err := s.tryWrite(users[k], n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(s.t, err)
	}
}

func (s *relayStack) tryWrite(user int64, n int) error {
	_, err := s.pool.Exec(context.Background(), `
WITH w AS (UPDATE wallets SET event_seq = event_seq + $2, balance = balance + $2 WHERE user_id = $1 RETURNING event_seq, balance)
INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
SELECT $1, w.event_seq - $2 + g, 'deposit', 1, 'CNY', w.balance - $2 + g, 1, '+8613800138000', 'en'
FROM w, generate_series(1, $2) g`, user, n)
	return err
}

// unpublished counts the events of users not yet marked published.
func (s *relayStack) unpublished(users []int64) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM wallet_events WHERE published_at IS NULL AND user_id = ANY($1)`, users).Scan(&n))
	return n
}

// relay starts a relay with sender and returns it and its stop.
func (s *relayStack) relay(sender ordering.Sender, cfg ordering.RelayConfig) (*ordering.Relay, func()) {
	s.t.Helper()
	cfg.Topic = s.topic
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	r, err := ordering.NewRelay(markSignal{Outbox: s.outbox, marked: &s.marked}, sender, cfg)
	require.NoError(s.t, err)
	require.NoError(s.t, r.Start(s.t.Context()))
	stop := func() { require.NoError(s.t, r.Stop(context.Background())) }
	s.t.Cleanup(stop)
	return r, stop
}

// markSignal is the outbox as the relay sees it, raising marked after each MarkPublished.
type markSignal struct {
	ordering.Outbox
	marked *wait.Signal
}

func (m markSignal) MarkPublished(ctx context.Context, recs []ordering.Published) error {
	defer m.marked.Raise()
	return m.Outbox.MarkPublished(ctx, recs)
}

// arrivals is what the consumer received: each user's seqs in arrival order, and the
// queues they came from.
type arrivals struct {
	mu      sync.Mutex
	seqs    map[int64][]int64
	queues  map[int64]map[string]bool
	arrived wait.Signal // raised after each batch handled
}

func (a *arrivals) handle(_ context.Context, batch []ordering.Delivery) error {
	defer a.arrived.Raise()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range batch {
		ev, err := walletevent.Decode(d.Body)
		if err != nil {
			return err
		}
		a.seqs[ev.UserID] = append(a.seqs[ev.UserID], ev.Seq)
		if a.queues[ev.UserID] == nil {
			a.queues[ev.UserID] = map[string]bool{}
		}
		a.queues[ev.UserID][d.QueueLabel()] = true
	}
	return nil
}

// complete reports whether every user received seqs 1..n[user] (copies allowed).
func (a *arrivals) complete(n map[int64]int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, want := range n {
		seen := map[int64]bool{}
		for _, s := range a.seqs[u] {
			seen[s] = true
		}
		if len(seen) != want {
			return false
		}
	}
	return true
}

// requireInOrder checks that each user's first arrivals are 1..n in order, and that all
// came from the queue the route (Java's selector) gives the user; a zero route checks only
// the order.
func (a *arrivals) requireInOrder(t *testing.T, n map[int64]int, route ordering.Route) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for u, want := range n {
		var firsts []int64
		seen := map[int64]bool{}
		for _, s := range a.seqs[u] {
			if !seen[s] {
				seen[s] = true
				firsts = append(firsts, s)
			}
		}
		expect := make([]int64, want)
		for i := range expect {
			expect[i] = int64(i + 1)
		}
		require.Equal(t, expect, firsts, "user %d: first arrivals in seq order", u)
		if len(route.Queues) == 0 {
			continue
		}
		require.Equal(t, map[string]bool{route.QueueOf(strconv.FormatInt(u, 10)).String(): true}, a.queues[u],
			"user %d: on the queue the producer's selector (%s) picks", u, route.Hash)
	}
}

// hangingSender is the real producer, except that sends to one queue hang (as to a broker
// that stopped answering with its port open) until released or their timeout.
type hangingSender struct {
	*ordering.OrderedProducer
	hung    ordering.Queue
	release chan struct{}
}

func (h *hangingSender) SendBatch(ctx context.Context, q ordering.Queue, msgs []ordering.Message) ([]ordering.SendResult, error) {
	if q == h.hung {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, fmt.Errorf("send to %s: %w", q, ctx.Err())
		}
	}
	return h.OrderedProducer.SendBatch(ctx, q, msgs)
}

// TestAHungQueueDoesNotDelayTheOthers: one of the topic's four queues stops answering (its
// sends hang). The users hashed to the other queues get their events published and marked
// within a second or two, again and again while it hangs, and the hung queue's users' events
// are not skipped; released, everything arrives, each user's in seq order, on the queue
// Java's selector picks.
func TestAHungQueueDoesNotDelayTheOthers(t *testing.T) {
	t.Parallel()
	s := newRelayStack(t, 4, ordering.HashJava)
	route := s.route()
	require.Len(t, route.Queues, 4)
	hung := route.Queues[2]
	sender := &hangingSender{OrderedProducer: s.producer, hung: hung, release: make(chan struct{})}

	users := s.users(40)
	var stuck, others []int64
	for _, u := range users {
		if route.QueueOf(strconv.FormatInt(u, 10)) == hung {
			stuck = append(stuck, u)
		} else {
			others = append(others, u)
		}
	}
	require.NotEmpty(t, stuck)
	want := s.writeEach(users, 3)
	r, _ := s.relay(sender, ordering.RelayConfig{StuckAfter: time.Second})
	first := wait.On(t, 10*time.Second, "the other queues' events marked", s.marked.Next, func() bool { return s.unpublished(others) == 0 })
	// More events while the queue still hangs: the others keep flowing.
	for _, u := range users {
		s.write(u, 2)
		want[u] = 5
	}
	second := wait.On(t, 10*time.Second, "their next events marked", s.marked.Next, func() bool { return s.unpublished(others) == 0 })
	require.Equal(t, 5*len(stuck), s.unpublished(stuck), "the hung queue's users wait, nothing skipped")
	wait.Until(t, 10*time.Second, "the hung queue reported stuck", func() bool {
		for _, q := range r.Stats().Queues {
			if q.Queue == hung {
				return q.State == ordering.QueueStuck && q.Lag > time.Second
			}
		}
		return false
	})
	close(sender.release)
	drained := wait.On(t, 30*time.Second, "everything marked", s.marked.Next, func() bool { return s.unpublished(users) == 0 })
	wait.On(t, 60*time.Second, "everything at the consumer", s.got.arrived.Next, func() bool { return s.got.complete(want) })
	s.got.requireInOrder(t, want, route)
	t.Logf("queue %s of 4 hung on broker %s: the other %d users' 120 events were marked in %s, their next 80 in %s, while %d users' events waited; released, all drained in %s, in order, each user on Java's queue",
		hung, s.broker.BrokerAddr, len(others), first.Round(time.Millisecond), second.Round(time.Millisecond), len(stuck), drained.Round(time.Millisecond))
	require.Less(t, first, 5*time.Second, "not held for the hung send's 10 s timeout")
	require.Less(t, second, 5*time.Second)
}

// TestRelayPublishesInOrderAndSurvivesRestart: 50 users × 40 events written by concurrent
// writers while the relay runs; the relay is stopped mid-stream and another (a second
// replica) takes over. An orderly consumer on the real broker sees every user's events,
// each user's in order, on the queue Java's selector picks.
func TestRelayPublishesInOrderAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	s := newRelayStack(t, 8, ordering.HashJava)
	users := s.users(50)
	want := map[int64]int{}
	for _, u := range users {
		want[u] = 40
	}
	r1, stop1 := s.relay(s.producer, ordering.RelayConfig{Batch: 64, MaxPerSend: 16})
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for range 20 {
			s.writeAll(users, 2)
		}
	}()
	wait.On(t, 60*time.Second, "the first relay to publish 500", s.marked.Next, func() bool { return r1.Stats().Published >= 500 })
	stop1()
	firstPublished := r1.Stats().Published
	r2, stop2 := s.relay(s.producer, ordering.RelayConfig{Batch: 64, MaxPerSend: 16})
	<-writing
	wait.On(t, 90*time.Second, "the outbox to drain", s.marked.Next, func() bool { return s.unpublished(users) == 0 })
	wait.On(t, 90*time.Second, "every event at the consumer", s.got.arrived.Next, func() bool { return s.got.complete(want) })
	stop2()
	route := s.route()
	s.got.requireInOrder(t, want, route)
	t.Logf("relay on broker %s: events=%d first_relay_published=%d second_relay_published=%d",
		s.broker.BrokerAddr, 50*40, firstPublished, r2.Stats().Published)
	require.GreaterOrEqual(t, firstPublished+r2.Stats().Published, int64(50*40), "every event published at least once")
}

// TestTheFNVHashPublishesWhereTheGoClientWould: with QUEUE_HASH=fnv the pumps read the users
// the Go client's FNV selector puts on their queues, and each user's events arrive in order
// on that queue.
func TestTheFNVHashPublishesWhereTheGoClientWould(t *testing.T) {
	t.Parallel()
	s := newRelayStack(t, 8, ordering.HashFNV)
	users := s.users(30)
	want := s.writeEach(users, 4)
	s.relay(s.producer, ordering.RelayConfig{})
	wait.On(t, 30*time.Second, "the outbox to drain", s.marked.Next, func() bool { return s.unpublished(users) == 0 })
	wait.On(t, 60*time.Second, "every event at the consumer", s.got.arrived.Next, func() bool { return s.got.complete(want) })
	route := s.route()
	require.Equal(t, ordering.HashFNV, route.Hash)
	s.got.requireInOrder(t, want, route)
}

// TestTheRelayFollowsAddedQueues: the topic grows from 2 to 4 queues while users' events
// flow; the relay's pumps follow the new route (users move to the added queues), and every
// user's events arrive, in order.
func TestTheRelayFollowsAddedQueues(t *testing.T) {
	t.Parallel()
	s := newRelayStack(t, 2, ordering.HashJava)
	users := s.users(30)
	want := s.writeEach(users, 2)
	r, _ := s.relay(s.producer, ordering.RelayConfig{RoutePoll: 200 * time.Millisecond})
	wait.On(t, 30*time.Second, "the first events marked", s.marked.Next, func() bool { return s.unpublished(users) == 0 })
	s.broker.CreateTopic(t, s.topic, 4)
	grown := time.Now()
	s.writeAll(users, 1)
	s.writeAll(users, 1)
	wait.Until(t, 30*time.Second, "the relay on the new route", func() bool { return len(r.Stats().Queues) == 4 })
	s.writeAll(users, 1)
	s.writeAll(users, 1)
	for _, u := range users {
		want[u] = 6
	}
	wait.On(t, 60*time.Second, "the outbox to drain", s.marked.Next, func() bool { return s.unpublished(users) == 0 })
	wait.On(t, 60*time.Second, "every event at the consumer", s.got.arrived.Next, func() bool { return s.got.complete(want) })
	s.got.requireInOrder(t, want, ordering.Route{})
	added := 0
	s.got.mu.Lock()
	for _, qs := range s.got.queues {
		if qs["broker-a/2"] || qs["broker-a/3"] {
			added++
		}
	}
	s.got.mu.Unlock()
	require.Positive(t, added, "users moved to the added queues")
	t.Logf("topic grown from 2 to 4 queues on broker %s under writes: %d of %d users moved to the added queues, every user's 6 events in order, drained %s after the change",
		s.broker.BrokerAddr, added, len(users), time.Since(grown).Round(time.Millisecond))
}
