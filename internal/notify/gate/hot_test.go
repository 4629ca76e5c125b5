package gate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestARunsRecordsAreHOT: while a lane holds a user, each record of its SMS (sent one at a
// time, as a provider's are) changes no indexed column of notify.progress: every such update
// is heap-only, so the hot path writes no index entry for it. Only the claim (due at its
// lease's end) and the give-back (idle) change due_at, once per turn, not per SMS.
func TestARunsRecordsAreHOT(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	const sms = 10
	for seq := range int64(sms) {
		receive(t, s, false, inbound(t, 1, seq+1, 100))
	}
	l, stop := startLanes(t, s, LaneConfig{Workers: 8, Sender: noopSender{}})
	l.Wake()
	wait.On(t, 30*time.Second, "the run delivered", recordedBy(s).Next, func() bool { return l.Stats().Sent >= sms })
	require.EqualValues(t, sms, l.Stats().Sent)
	require.EqualValues(t, 1, l.Stats().Claims, "one turn")
	// The lanes' backends flush their statistics when they end.
	stop()
	pool.Reset()
	var upd, hot int64
	require.Eventually(t, func() bool {
		_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE schemaname = 'notify' AND relname = 'progress'`).Scan(&upd, &hot))
		// The claim and a record per SMS.
		return upd >= 1+sms
	}, 30*time.Second, 50*time.Millisecond, "the lanes' updates reach the statistics")
	require.EqualValues(t, 1+sms, upd)
	require.Equal(t, upd-2, hot, "every update but the claim and the give-back is HOT")
}

// TestALaneThatDiesLeavesItsWokenUserClaimable: a user woken by news and claimed is due at
// its lease's end, and its news is deleted: should its lane die, the user is claimed again
// once the lease runs out. A lane that gives it back as idle while news came after its claim
// leaves it due: the give-back reads the inbox under the user's lock.
func TestALaneThatDiesLeavesItsWokenUserClaimable(t *testing.T) {
	t.Parallel()
	pool, s := userOneClaimed(t)
	ctx := context.Background()
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id = 1 AND due_at = lane_until`), "due at its lease's end")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.wakes`), "the claim deleted the news it read")
	c, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, c, "leased")

	// Lane "a" dies: its lease runs out.
	_, err = pool.Exec(ctx, `UPDATE notify.progress SET lane_until = now() - interval '1 second', due_at = now() - interval '1 second' WHERE user_id = 1`)
	require.NoError(t, err)
	c, err = s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "claimed again once the dead lane's lease ran out")
	require.Equal(t, int64(2), c[0].At.Fence)

	// News after this claim, then a give-back as idle: the user stays due, and the next
	// claim reads both SMS.
	receive(t, s, false, inbound(t, 1, 2, 200))
	require.NoError(t, s.release(ctx, 1, 2, false))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id = 1 AND lane_owner IS NULL AND due_at <= now()`))
	c, err = s.claimUsers(ctx, "c", 10, time.Minute, 5)
	require.NoError(t, err)
	require.Len(t, c, 1, "the news wakes the user")
	require.Len(t, c[0].Heads, 2)
}

// TestNewsAnotherClaimDrainedIsNotLost: news of a leased user is deleted by whichever claim
// reads it (the user has a due time: its lease's end); if its lane then gives it back as
// idle, having claimed it before the news arrived, the give-back finds the news in the inbox
// and leaves the user due, so it is never stranded.
func TestNewsAnotherClaimDrainedIsNotLost(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	// User 1 has had seq 1 and is due with nothing in the inbox (say a retry whose SMS an
	// operator skipped): lane "a" claims it and reads no head.
	_, err := pool.Exec(ctx, `INSERT INTO notify.progress (user_id, last_seq, due_at) VALUES (1, 1, now())`)
	require.NoError(t, err)
	a, err := s.claimUsers(ctx, "a", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, a, 1)
	require.Empty(t, a[0].Heads[0].Status, "no head")

	// Seq 2 arrives; another claim reads its wake row and deletes it: the user is leased.
	receive(t, s, false, inbound(t, 1, 2, 200))
	none, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, none)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.wakes`), "the news was drained")

	// Lane "a" gives the user back as idle: it is due, and the next claim sends seq 2.
	require.NoError(t, s.release(ctx, 1, a[0].At.Fence, false))
	c, err := s.claimUsers(ctx, "c", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "the news is not lost")
	require.Equal(t, int64(2), c[0].Heads[0].Seq)
	require.Equal(t, StatusPending, c[0].Heads[0].Status)
}

// TestNewsBehindHeldUsersIsFound: the news of users whose positions another session holds
// (an operator's forgotten transaction, say) waits for them, and is passed over: the news
// of everyone else behind it is still claimed, however much of it the held users have.
func TestNewsBehindHeldUsersIsFound(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	for seq := int64(1); seq <= 100; seq++ { // users 1–3: 100 wake rows each, the oldest
		receive(t, s, false, inbound(t, 1, seq, 100), inbound(t, 2, seq, 100), inbound(t, 3, seq, 100))
	}
	receive(t, s, false, inbound(t, 4, 1, 100))
	held, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, held.Rollback(ctx)) }()
	_, err = held.Exec(ctx, `SELECT 1 FROM notify.progress WHERE user_id IN (1, 2, 3) FOR UPDATE`)
	require.NoError(t, err)

	c, err := s.claimUsers(ctx, "a", 1, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "user 4's news is found behind the held users'")
	require.Equal(t, int64(4), c[0].UserID)
	require.Equal(t, 300, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id IN (1, 2, 3)`), "the held users' news waits for them")
}
