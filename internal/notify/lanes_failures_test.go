package notify

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testdb"
)

// heldCall is one Send a heldSender holds until the test answers it.
type heldCall struct {
	m      SMS
	answer chan error
}

// heldSender hands each Send to the test and returns what the test answers: a worker that
// stalls inside a send for as long as the test likes (within the send timeout).
type heldSender struct{ calls chan heldCall }

func (h heldSender) Send(ctx context.Context, m SMS) error {
	c := heldCall{m: m, answer: make(chan error, 1)}
	select {
	case h.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h heldSender) next(t *testing.T) heldCall {
	t.Helper()
	select {
	case c := <-h.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a send")
		return heldCall{}
	}
}

// TestAStaleFenceCannotRecord: a worker stalls inside a send while a process restarted under
// the same owner name (CONSUMER_INSTANCE) takes its users back and claims the user under a
// new fence. The owner name and the user's progress are still what the stalled worker saw,
// but its late outcome is refused and counted as fenced; the new claim's is recorded.
func TestAStaleFenceCannotRecord(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	receive(t, s, false, inbound(t, 1, 1, 100))
	held := heldSender{calls: make(chan heldCall)}
	old, _ := startLanes(t, s, LaneConfig{Workers: 1, Sender: held, Owner: "host/notifier-0"})
	stale := held.next(t)
	require.EqualValues(t, 1, count(t, pool, `SELECT fence FROM notify.progress WHERE user_id = 1`))

	successor, _ := startLanes(t, s, LaneConfig{Workers: 1, Sender: held, Owner: "host/notifier-0"})
	fresh := held.next(t)
	require.Equal(t, stale.m.IdempotencyKey, fresh.m.IdempotencyKey, "the same SMS, under the same key")
	require.EqualValues(t, 2, count(t, pool, `SELECT fence FROM notify.progress WHERE user_id = 1`))

	stale.answer <- nil
	waitUntil(t, 10*time.Second, "the stale worker's outcome to be fenced off", func() bool { return old.Stats().Fenced == 1 })
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status <> 'pending'`), "the stale worker recorded")

	fresh.answer <- fmt.Errorf("409: %w", ErrAlreadyDelivered)
	waitUntil(t, 10*time.Second, "the new claim's record", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 1 AND status = 'sent'`) == 1
	})
	require.Zero(t, successor.Stats().Fenced)
	require.EqualValues(t, 1, successor.Stats().Sent)
	require.Zero(t, old.Stats().Sent)
}

// leaseWatch is a sender that notes, at the start of every send, how much of the user's
// lease the database says is left, then sends through inner; onSend runs first.
type leaseWatch struct {
	pool   *pgxpool.Pool
	inner  Sender
	onSend func(SMS)
	mu     sync.Mutex
	left   map[int64]time.Duration // seq → lease left when its send started
}

func (w *leaseWatch) Send(ctx context.Context, m SMS) error {
	var left float64
	if err := w.pool.QueryRow(ctx, `SELECT extract(epoch FROM lane_until - now())::float8 FROM notify.progress WHERE user_id = $1`, m.UserID).Scan(&left); err != nil {
		return err
	}
	w.mu.Lock()
	w.left[m.Seq] = time.Duration(left * float64(time.Second))
	w.mu.Unlock()
	if w.onSend != nil {
		w.onSend(m)
	}
	return w.inner.Send(ctx, m)
}

// TestNoSendStartsOnALeaseAboutToExpire: a record that waits on a lock (a database blip)
// renews the lease from its start, so the lane comes out of it with less than twice the
// send timeout left. It must not call the provider then: it gives the user back, and the
// next claim sends the SMS with a whole lease.
func TestNoSendStartsOnALeaseAboutToExpire(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	const lease, sendTimeout = 3 * time.Second, time.Second
	w := &leaseWatch{pool: pool, inner: newProvider(pool), left: map[int64]time.Duration{}}
	w.onSend = func(m SMS) {
		if m.Seq != 1 {
			return
		}
		// Seq 1's record waits 1.8 s for this lock, leaving 1.2 s of a 3 s lease.
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM notify.progress WHERE user_id = $1 FOR UPDATE`, m.UserID)
		require.NoError(t, err)
		time.AfterFunc(1800*time.Millisecond, func() { _ = tx.Rollback(ctx) })
	}
	receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200))
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: w, Lease: lease, SendTimeout: sendTimeout})
	waitUntil(t, 20*time.Second, "both SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND status = 'sent'`) == 2
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.left, 2)
	for seq, left := range w.left {
		require.GreaterOrEqual(t, left, 2*sendTimeout-200*time.Millisecond, "seq %d's send started with %s of its lease left", seq, left)
	}
	require.EqualValues(t, 1, lanes.Stats().LeaseShort, "the user was given back once instead of sent to")
}

func TestSendable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		left, timeout time.Duration
		want          bool
	}{
		{30 * time.Second, 5 * time.Second, true},
		{10 * time.Second, 5 * time.Second, true},
		{10*time.Second - time.Millisecond, 5 * time.Second, false},
		{time.Second, 5 * time.Second, false},
		{-time.Second, 5 * time.Second, false},
	} {
		require.Equal(t, tc.want, sendable(tc.left, tc.timeout), "%s left, timeout %s", tc.left, tc.timeout)
	}
}
