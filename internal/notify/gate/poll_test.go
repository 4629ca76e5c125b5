package gate

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestIdleLanesPollLessAndLess: lanes with nothing to do look for due users less and less
// often (the poll doubles up to IdlePoll): over a second, far fewer claims than a fixed
// Poll would run. Claims are transactions of the test's own database.
func TestIdleLanesPollLessAndLess(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	var db string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	commits := func() int64 {
		// Backends flush their statistics when they end.
		pool.Reset()
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, db).Scan(&n))
		return n
	}
	before := commits()
	const poll = 10 * time.Millisecond
	_, stop := startLanes(t, s, LaneConfig{Workers: 2, Sender: senders.NewLogSender(io.Discard), Poll: poll, IdlePoll: 160 * time.Millisecond})
	// A window of idleness to count the polls in: nothing is awaited here.
	<-time.After(time.Second)
	stop()
	var n int64
	wait.Until(t, 10*time.Second, "the lanes' statistics", func() bool {
		n = commits() - before
		return n >= 5
	})
	// A fixed 10ms poll would run ~100 claims; stretched, ~5 to reach 160ms, then ~6.
	require.Less(t, n, int64(30), "claims while idle")
}

// TestARetryIsWokenInProcess: with a poll far too slow to matter, a failed SMS is still tried
// again as soon as its backoff ends: the lane that recorded the retry wakes the dispatcher
// then.
func TestARetryIsWokenInProcess(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	var failed atomic.Bool
	p.failWhen(func(c smsprovider.Call) bool { return failed.CompareAndSwap(false, true) })
	l, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender, Poll: time.Hour,
		Policy: RetryPolicy{Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 3}})
	receive(t, s, false, inbound(t, 1, 1, 100))
	l.Wake() // as the inbox does
	wait.On(t, 10*time.Second, "the retry", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 1 AND status = 'sent' AND attempts = 2`) == 1
	})
}
