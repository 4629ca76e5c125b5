package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

// pgOutbox is a minimal outbox table in the test's own database, so the relay is tested on
// real Postgres (an advisory lock for the lead) without the wallet.
type pgOutbox struct {
	pool    *pgxpool.Pool
	lockKey int64
}

func newPGOutbox(t *testing.T) *pgOutbox {
	pool, _ := testdb.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE test_outbox(
		id bigserial PRIMARY KEY, key text NOT NULL, seq bigint NOT NULL, body bytea NOT NULL,
		published_at timestamptz, msg_id text, UNIQUE(key, seq))`)
	require.NoError(t, err)
	return &pgOutbox{pool: pool, lockKey: 4242}
}

// Lead holds an advisory lock on a connection of its own, as the wallet's outbox does.
func (o *pgOutbox) Lead(ctx context.Context) (context.Context, func(), error) {
	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	for {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, o.lockKey).Scan(&got); err != nil {
			conn.Release()
			return nil, nil, err
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	return lctx, func() {
		cancel()
		_, _ = conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, o.lockKey)
		conn.Release()
	}, nil
}

func (o *pgOutbox) insert(t *testing.T, key string, seq int) {
	_, err := o.pool.Exec(context.Background(), `INSERT INTO test_outbox(key, seq, body) VALUES ($1, $2, $3)`,
		key, seq, []byte(fmt.Sprintf("%s:%d", key, seq)))
	require.NoError(t, err)
}

func (o *pgOutbox) Pending(ctx context.Context, limit int) ([]ordering.OutboxRecord, error) {
	rows, err := o.pool.Query(ctx, `SELECT id, key, seq, body FROM test_outbox WHERE published_at IS NULL ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ordering.OutboxRecord
	for rows.Next() {
		var r ordering.OutboxRecord
		if err := rows.Scan(&r.ID, &r.Key, &r.Seq, &r.Body); err != nil {
			return nil, err
		}
		r.Keys = []string{r.Key + ":" + strconv.FormatInt(r.Seq, 10)}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (o *pgOutbox) MarkPublished(ctx context.Context, recs []ordering.Published) error {
	for _, r := range recs {
		if _, err := o.pool.Exec(ctx, `UPDATE test_outbox SET published_at = now(), msg_id = $2 WHERE id = $1`, r.ID, r.MsgID); err != nil {
			return err
		}
	}
	return nil
}

func (o *pgOutbox) unpublished(t *testing.T) int {
	var n int
	require.NoError(t, o.pool.QueryRow(context.Background(), `SELECT count(*) FROM test_outbox WHERE published_at IS NULL`).Scan(&n))
	return n
}

// TestRelayPublishesInOrderAndSurvivesRestart: 50 keys × 40 records written while the relay
// runs; the relay is stopped mid-stream and a new one (another "replica") takes over. An
// orderly consumer on the real broker sees every key's records complete and in order.
func TestRelayPublishesInOrderAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	b := rmqtest.Require(t)
	ob := newPGOutbox(t)
	topic, group := rmqtest.Unique("it-relay"), rmqtest.Unique("it-relay-group")
	b.CreateTopic(t, topic, 8)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: rmqtest.Unique("it-relay-producer")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks

	got := newTally()
	c, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{Namesrv: []string{b.Namesrv}, Credentials: b.Credentials, Group: group, Topic: topic,
		FromFirstOffset: true},
		func(_ context.Context, batch []ordering.Delivery) error {
			for _, d := range batch {
				k, seq := parseBody(d.Body)
				got.add(k, seq)
			}
			return nil
		})
	require.NoError(t, err)
	require.NoError(t, c.Start())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Shutdown(ctx))
	}()

	cfg := ordering.RelayConfig{Topic: topic, Batch: 64, MaxPerSend: 16, Poll: 50 * time.Millisecond}
	startRelay := func() (*ordering.Relay, context.CancelFunc, chan error) {
		r, err := ordering.NewRelay(ob, p, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return r, cancel, done
	}
	r1, stop1, done1 := startRelay()

	// Writers: one goroutine per 5 keys, each key's seqs in order.
	var wg sync.WaitGroup
	for g := 0; g < numProducers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for seq := 1; seq <= msgsPerKey; seq++ {
				for k := g; k < numKeys; k += numProducers {
					ob.insert(t, key(k), seq)
				}
			}
		}(g)
	}
	// Stop the first relay mid-stream.
	waitFor(t, 60*time.Second, "the first relay to publish 500", func() bool { return r1.Stats().Published >= 500 })
	stop1()
	require.NoError(t, <-done1)
	firstPublished := r1.Stats().Published
	r2, stop2, done2 := startRelay()
	wg.Wait()
	waitFor(t, 90*time.Second, "the outbox to drain", func() bool { return ob.unpublished(t) == 0 })
	waitFor(t, 90*time.Second, "every record at the consumer", func() bool { return got.distinct() == numKeys*msgsPerKey })
	stop2()
	require.NoError(t, <-done2)

	lost, dup, ooo, _ := got.counts()
	t.Logf("relay on broker %s: records=%d first_relay_published=%d second_relay_published=%d lost=%d duplicated=%d out_of_order=%d",
		b.BrokerAddr, numKeys*msgsPerKey, firstPublished, r2.Stats().Published, lost, dup, ooo)
	require.Zero(t, lost)
	require.Zero(t, ooo)
	require.EqualValues(t, numKeys*msgsPerKey, firstPublished+r2.Stats().Published)
}

// flakySender fails every send of one key until healed, and records what it sent.
type flakySender struct {
	mu     sync.Mutex
	broken string
	sent   map[string][]int64
	calls  atomic.Int64
}

func (f *flakySender) SendOrderly(_ context.Context, m ordering.Message) (ordering.SendResult, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.ShardingKey == f.broken {
		return ordering.SendResult{}, errors.New("broker said no")
	}
	_, seq := parseBody(m.Body)
	f.sent[m.ShardingKey] = append(f.sent[m.ShardingKey], int64(seq))
	return ordering.SendResult{MsgID: fmt.Sprintf("id-%s-%d", m.ShardingKey, seq)}, nil
}

// TestRelayHaltsOnlyTheFailingKey: a key whose sends fail is not skipped ahead, while other
// keys flow; once sends succeed again it resumes from its first unpublished record.
func TestRelayHaltsOnlyTheFailingKey(t *testing.T) {
	t.Parallel()
	ob := newPGOutbox(t)
	s := &flakySender{broken: "bad", sent: map[string][]int64{}}
	for seq := 1; seq <= 5; seq++ {
		ob.insert(t, "bad", seq)
		ob.insert(t, "good", seq)
	}
	r, err := ordering.NewRelay(ob, s, ordering.RelayConfig{Topic: "t", Poll: 50 * time.Millisecond, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "good to be published", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.sent["good"]) == 5
	})
	waitFor(t, 10*time.Second, "bad to be retried", func() bool { return r.Stats().Failed >= 3 })
	require.Equal(t, 5, ob.unpublished(t), "nothing of the failing key is marked published")
	s.mu.Lock()
	require.Empty(t, s.sent["bad"])
	s.broken = ""
	s.mu.Unlock()
	waitFor(t, 10*time.Second, "bad to drain", func() bool { return ob.unpublished(t) == 0 })
	cancel()
	require.NoError(t, <-done)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []int64{1, 2, 3, 4, 5}, s.sent["bad"])
	require.Equal(t, []int64{1, 2, 3, 4, 5}, s.sent["good"])
}

// TestOnlyOneRelayIsActive: two relays on one database and lock key; one publishes, the
// other stands by, and takes over when the first stops.
func TestOnlyOneRelayIsActive(t *testing.T) {
	t.Parallel()
	ob := newPGOutbox(t)
	s := &flakySender{sent: map[string][]int64{}}
	cfg := ordering.RelayConfig{Topic: "t", Poll: 50 * time.Millisecond}
	r1, _ := ordering.NewRelay(ob, s, cfg)
	r2, _ := ordering.NewRelay(ob, s, cfg)
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	done1, done2 := make(chan error, 1), make(chan error, 1)
	go func() { done1 <- r1.Run(ctx1) }()
	waitFor(t, 10*time.Second, "r1 active", func() bool { return r1.Stats().Active })
	go func() { done2 <- r2.Run(ctx2) }()
	ob.insert(t, "k", 1)
	waitFor(t, 10*time.Second, "k:1 published", func() bool { return ob.unpublished(t) == 0 })
	require.False(t, r2.Stats().Active, "the second relay stands by")
	require.EqualValues(t, 0, r2.Stats().Published)
	cancel1()
	require.NoError(t, <-done1)
	waitFor(t, 10*time.Second, "r2 to take over", func() bool { return r2.Stats().Active })
	ob.insert(t, "k", 2)
	waitFor(t, 10*time.Second, "k:2 published", func() bool { return ob.unpublished(t) == 0 })
	require.EqualValues(t, 1, r2.Stats().Published)
	cancel2()
	require.NoError(t, <-done2)
}

// TestRelayIsWokenInProcess: with a poll of an hour, only Wake can start the round that
// publishes a record written after the relay went idle.
func TestRelayIsWokenInProcess(t *testing.T) {
	t.Parallel()
	ob := newPGOutbox(t)
	s := &flakySender{sent: map[string][]int64{}}
	r, err := ordering.NewRelay(ob, s, ordering.RelayConfig{Topic: "t", Poll: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitFor(t, 10*time.Second, "the relay to lead", func() bool { return r.Stats().Active })
	waitFor(t, 10*time.Second, "its first (empty) round", func() bool { return r.Stats().Rounds == 0 })
	ob.insert(t, "k", 1)
	r.Wake()
	waitFor(t, 10*time.Second, "k:1 published", func() bool { return ob.unpublished(t) == 0 })
	cancel()
	require.NoError(t, <-done)
	require.EqualValues(t, 1, r.Stats().Published)
}
