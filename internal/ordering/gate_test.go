package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

var errPermanent = errors.New("permanent")

func newGate(t *testing.T, max int) (*ordering.Gate, *pgxpool.Pool) {
	pool, _ := testdb.New(t)
	g := ordering.NewGate(pool, ordering.GateConfig{MaxAttempts: max, RetryBase: time.Millisecond, WaitBase: time.Millisecond,
		IsPermanent: func(err error) bool { return errors.Is(err, errPermanent) }})
	return g, pool
}

func item(user, seq int64) ordering.GateItem {
	return ordering.GateItem{UserID: user, Seq: seq, MsgID: fmt.Sprintf("m-%d-%d", user, seq), Kind: "deposit",
		Event: []byte(fmt.Sprintf(`{"user_id":%d,"seq":%d}`, user, seq)), Text: fmt.Sprintf("sms %d", seq)}
}

// logDeliver writes a row in the gate's transaction, like the log sender: the row exists
// exactly when the gate recorded the item as sent.
func logDeliver(user, seq int64) ordering.DeliverFunc {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text) VALUES ($1, $2, '+8613800000001', 'x')`, user, seq)
		return err
	}
}

func smsRows(t *testing.T, pool *pgxpool.Pool, user int64) []int64 {
	rows, err := pool.Query(context.Background(), `SELECT seq FROM notify.sms_log WHERE user_id = $1 ORDER BY id`, user)
	require.NoError(t, err)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return seqs
}

func progress(t *testing.T, pool *pgxpool.Pool, user int64) int64 {
	var last int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT last_seq FROM notify.progress WHERE user_id = $1`, user).Scan(&last))
	return last
}

func status(t *testing.T, pool *pgxpool.Pool, user, seq int64) (string, int) {
	var s string
	var a int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, attempts FROM notify.notifications WHERE user_id = $1 AND seq = $2`, user, seq).Scan(&s, &a))
	return s, a
}

func TestGateSendsInOrderAndDropsDuplicates(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 3)
	ctx := context.Background()
	for seq := int64(1); seq <= 3; seq++ {
		d := g.Handle(ctx, item(1, seq), logDeliver(1, seq))
		require.Equal(t, ordering.Sent, d.Verdict)
		require.False(t, d.Result.IsRetry())
	}
	// The same event published twice (relay resend) and an old redelivery: one SMS each.
	for _, seq := range []int64{3, 1, 2} {
		d := g.Handle(ctx, item(1, seq), func(context.Context, pgx.Tx) error {
			t.Fatalf("duplicate %d delivered", seq)
			return nil
		})
		require.Equal(t, ordering.Duplicate, d.Verdict)
		require.False(t, d.Result.IsRetry())
	}
	require.Equal(t, []int64{1, 2, 3}, smsRows(t, pool, 1))
	require.EqualValues(t, 3, progress(t, pool, 1))
	require.Equal(t, ordering.GateStats{Sent: 3, Duplicate: 3}, g.Stats())
}

func TestGateWaitsForAMissingPredecessor(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 3)
	ctx := context.Background()
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(2, 1), logDeliver(2, 1)).Verdict)
	// seq 3 arrives before seq 2: it waits, several times, and sends nothing.
	for i := 0; i < 3; i++ {
		d := g.Handle(ctx, item(2, 3), func(context.Context, pgx.Tx) error { t.Fatal("sent out of order"); return nil })
		require.Equal(t, ordering.Waiting, d.Verdict)
		require.True(t, d.Result.IsRetry())
	}
	var waiting int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT waiting_seq FROM notify.progress WHERE user_id = 2`).Scan(&waiting))
	require.EqualValues(t, 3, waiting, "the wait is visible")
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(2, 2), logDeliver(2, 2)).Verdict)
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(2, 3), logDeliver(2, 3)).Verdict)
	require.Equal(t, []int64{1, 2, 3}, smsRows(t, pool, 2))
	var cleared *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT waiting_seq FROM notify.progress WHERE user_id = 2`).Scan(&cleared))
	require.Nil(t, cleared)
}

func TestGateRetriesThenDeadLettersAndTheNextProceeds(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 3)
	ctx := context.Background()
	var calls atomic.Int32
	failing := func(context.Context, pgx.Tx) error { calls.Add(1); return errors.New("provider down") }
	var last ordering.Decision
	for i := 1; i <= 3; i++ {
		last = g.Handle(ctx, item(3, 1), failing)
		if i < 3 {
			require.Equal(t, ordering.Retrying, last.Verdict, "attempt %d", i)
			require.True(t, last.Result.IsRetry())
		}
	}
	require.Equal(t, ordering.DeadLettered, last.Verdict)
	require.Equal(t, 3, last.Attempts)
	require.EqualValues(t, 3, calls.Load(), "exactly the configured attempts")
	st, attempts := status(t, pool, 3, 1)
	require.Equal(t, "dead_lettered", st)
	require.Equal(t, 3, attempts)
	// The message comes back (send-back failed): it goes to the DLQ again, never delivered.
	d := g.Handle(ctx, item(3, 1), failing)
	require.Equal(t, ordering.Duplicate, d.Verdict)
	require.EqualValues(t, 3, calls.Load())
	// The user's next SMS proceeds.
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(3, 2), logDeliver(3, 2)).Verdict)
	require.Equal(t, []int64{2}, smsRows(t, pool, 3))
}

func TestGateDeadLettersAPermanentFailureAtOnce(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 5)
	d := g.Handle(context.Background(), item(4, 1), func(context.Context, pgx.Tx) error {
		return fmt.Errorf("422 from provider: %w", errPermanent)
	})
	require.Equal(t, ordering.DeadLettered, d.Verdict)
	require.Equal(t, 1, d.Attempts)
	require.EqualValues(t, 1, progress(t, pool, 4))
}

// TestGateCountsAnAttemptThatCrashed: the attempt is committed before delivery, so a
// delivery that never returns (the process died) still counts, and the limit holds across
// restarts (unlike the client's in-memory counter).
func TestGateCountsAnAttemptThatCrashed(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 2)
	ctx := context.Background()
	crash := errors.New("crash")
	for i := 0; i < 2; i++ {
		// A cancelled context models the process dying mid-delivery: nothing is recorded.
		cctx, cancel := context.WithCancel(ctx)
		d := g.Handle(cctx, item(5, 1), func(context.Context, pgx.Tx) error { cancel(); return crash })
		require.NotEqual(t, ordering.Sent, d.Verdict)
	}
	// A fresh gate (restart): the attempts are over, so it is dead-lettered without delivery.
	g2 := ordering.NewGate(pool, ordering.GateConfig{MaxAttempts: 2, RetryBase: time.Millisecond})
	d := g2.Handle(ctx, item(5, 1), func(context.Context, pgx.Tx) error { t.Fatal("delivered past the limit"); return nil })
	require.Equal(t, ordering.DeadLettered, d.Verdict)
	st, _ := status(t, pool, 5, 1)
	require.Equal(t, "dead_lettered", st)
}

// TestGateTwoConsumersOneDelivery: two consumers handle the same item at once (a rebalance
// while the old owner's lock has not expired): one delivers, the other acknowledges.
func TestGateTwoConsumersOneDelivery(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 3)
	ctx := context.Background()
	const users, seqs = 20, 10
	var wg sync.WaitGroup
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(1); seq <= seqs; seq++ {
				for u := int64(100); u < 100+users; u++ {
					d := g.Handle(ctx, item(u, seq), logDeliver(u, seq))
					if d.Verdict != ordering.Sent && d.Verdict != ordering.Duplicate {
						t.Errorf("user %d seq %d: %s (%v)", u, seq, d.Verdict, d.Err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for u := int64(100); u < 100+users; u++ {
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, smsRows(t, pool, u))
	}
	st := g.Stats()
	require.EqualValues(t, users*seqs, st.Sent)
	require.EqualValues(t, users*seqs, st.Duplicate)
}

func TestReconcilerRecordsAnUnrecordedDeadLetter(t *testing.T) {
	t.Parallel()
	g, pool := newGate(t, 3)
	ctx := context.Background()
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(6, 1), logDeliver(6, 1)).Verdict)
	// seq 3 reached the DLQ with no record (e.g. dead-lettered by the client's own counter).
	rec, err := g.RecordDeadLetter(ctx, item(6, 3), "found in DLQ")
	require.NoError(t, err)
	require.True(t, rec)
	require.EqualValues(t, 1, progress(t, pool, 6), "seq 2 is still missing")
	rec, err = g.RecordDeadLetter(ctx, item(6, 3), "found in DLQ")
	require.NoError(t, err)
	require.False(t, rec, "idempotent")
	// seq 2 is sent; progress runs past the recorded seq 3; seq 4 then proceeds.
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(6, 2), logDeliver(6, 2)).Verdict)
	require.EqualValues(t, 3, progress(t, pool, 6))
	require.Equal(t, ordering.Duplicate, g.Handle(ctx, item(6, 3), logDeliver(6, 3)).Verdict)
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(6, 4), logDeliver(6, 4)).Verdict)
	require.Equal(t, []int64{1, 2, 4}, smsRows(t, pool, 6))
	// A sent item found in the DLQ (a stray copy) is left alone.
	rec, err = g.RecordDeadLetter(ctx, item(6, 2), "found in DLQ")
	require.NoError(t, err)
	require.False(t, rec)
	st, _ := status(t, pool, 6, 2)
	require.Equal(t, "sent", st)
}

// TestGateParksWhenThePredecessorIsBehind: seq 3 arrives first and seq 2 sits behind it on
// the same queue, so waiting cannot help: after ParkAfter seq 3 is parked and acknowledged,
// seq 2 is sent, and the parked seq 3 is then ready and delivered, in order, once.
func TestGateParksWhenThePredecessorIsBehind(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	g := ordering.NewGate(pool, ordering.GateConfig{MaxAttempts: 3, RetryBase: time.Millisecond, WaitBase: time.Millisecond, ParkAfter: 20 * time.Millisecond})
	ctx := context.Background()
	require.Equal(t, ordering.Sent, g.Handle(ctx, item(7, 1), logDeliver(7, 1)).Verdict)
	never := func(context.Context, pgx.Tx) error { t.Fatal("delivered out of order"); return nil }
	d := g.Handle(ctx, item(7, 3), never)
	require.Equal(t, ordering.Waiting, d.Verdict)
	deadline := time.Now().Add(5 * time.Second)
	for d.Verdict == ordering.Waiting && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the queue's suspend, in miniature
		d = g.Handle(ctx, item(7, 3), never)
	}
	require.Equal(t, ordering.Parked, d.Verdict)
	require.False(t, d.Result.IsRetry(), "a parked message is acknowledged: its queue moves on")
	require.Equal(t, ordering.Parked, g.Handle(ctx, item(7, 3), never).Verdict, "a duplicate of a parked message parks nothing new")
	ready, err := g.ParkedReady(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, ready, "not ready while seq 2 is missing")

	require.Equal(t, ordering.Sent, g.Handle(ctx, item(7, 2), logDeliver(7, 2)).Verdict)
	ready, err = g.ParkedReady(ctx, 10)
	require.NoError(t, err)
	require.Len(t, ready, 1)
	require.EqualValues(t, 3, ready[0].Seq)
	require.Equal(t, item(7, 3).Text, ready[0].Text)
	require.JSONEq(t, string(item(7, 3).Event), string(ready[0].Event))
	require.Equal(t, ordering.Sent, g.Handle(ctx, ready[0], logDeliver(7, 3)).Verdict)
	require.Equal(t, []int64{1, 2, 3}, smsRows(t, pool, 7))
	n, err := g.ParkedCount(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
