package gate

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestProgressUpdatesAreHOT: delivering SMS to users who receive them one after another
// (each claim and each record updates its user's progress row) changes no indexed column
// of notify.progress: every update is heap-only, so the hot path writes no index entry for
// it. (Few users and rounds: their rows share one page, which holds every version they leave
// without waiting for pruning; the test is of the columns, not of the fillfactor.)
func TestProgressUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	l, stop := startLanes(t, s, LaneConfig{Workers: 8, Sender: senders.NewLogSender(io.Discard)})
	const users, rounds = 5, 4
	for seq := range int64(rounds) {
		for u := range int64(users) {
			receive(t, s, false, inbound(t, u+1, seq+1, 100))
		}
		l.Wake()
		want := (seq + 1) * users
		require.Eventually(t, func() bool { return l.Stats().Sent >= want }, 30*time.Second, 5*time.Millisecond,
			"round %d delivered", seq+1)
	}
	require.EqualValues(t, users*rounds, l.Stats().Sent)
	// The lanes' backends flush their statistics when they end.
	stop()
	pool.Reset()
	var upd, hot int64
	require.Eventually(t, func() bool {
		_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE schemaname = 'notify' AND relname = 'progress'`).Scan(&upd, &hot))
		// Two updates per SMS at least: its claim and its record.
		return upd >= 2*users*rounds
	}, 30*time.Second, 50*time.Millisecond, "the lanes' updates reach the statistics")
	require.Equal(t, upd, hot, "every progress update on the hot path is HOT")
}

// TestALaneThatDiesLeavesItsWokenUserClaimable: a user woken by news and claimed keeps no
// due time (a HOT claim), yet should its lane die, the user is claimed again once the lease
// runs out: its wake rows stay while it is leased. A lane that gives it back idle drops the
// rows its claim read and keeps news that came after.
func TestALaneThatDiesLeavesItsWokenUserClaimable(t *testing.T) {
	t.Parallel()
	pool, s := userOneClaimed(t)
	ctx := context.Background()
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id = 1 AND due_at IS NULL`), "no due time while leased")
	c, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, c, "leased")

	// Lane "a" dies: its lease runs out.
	_, err = pool.Exec(ctx, `UPDATE notify.progress SET lane_until = now() - interval '1 second' WHERE user_id = 1`)
	require.NoError(t, err)
	c, err = s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "claimed again once the dead lane's lease ran out")
	require.Equal(t, int64(2), c[0].At.Fence)

	// News after this claim, then a give-back as idle: the news stays and wakes the user.
	_, err = pool.Exec(ctx, `INSERT INTO notify.wakes (user_id) VALUES (1)`)
	require.NoError(t, err)
	require.NoError(t, s.release(ctx, 1, 2, false))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id = 1`), "only the news after the claim stays")
	c, err = s.claimUsers(ctx, "c", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "the news wakes the user")
}
