package inbox_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestARedeliveryOfAPrunedSeqIsIgnored: user 7's SMS 1–3 are delivered, and retention prunes
// their inbox rows. The broker then delivers seq 2 and 3 again (a consumer that crashed
// before its offset commit), followed by the new seq 4, through the consumer's own path: the
// copies are ignored by the user's position (notify.progress, never pruned), not stored and
// not sent again; seq 4 goes out once, after 3.
func TestARedeliveryOfAPrunedSeqIsIgnored(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gates := gate.NewStore(pool)
	in := inbox.NewInbox(inbox.NewStore(pool), gates, nil, log)
	started(t, in)
	prov := smsprovider.Start()
	t.Cleanup(prov.Close)
	sender, err := senders.NewWebhookSender(prov.URL(), 0, nil)
	require.NoError(t, err)
	var sent wait.Signal // raised by the lanes after each SMS recorded sent
	lanes, err := gate.NewLanes(gates, gate.LaneConfig{Owner: "retention-test", Sender: sender, Poll: 20 * time.Millisecond,
		Policy: gate.RetryPolicy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 3}, Logger: log,
		ObserveSent: func(time.Duration) { sent.Raise() }})
	require.NoError(t, err)
	require.NoError(t, lanes.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, lanes.Stop(sctx))
	})
	delivered := func(n int) func() bool { return func() bool { return len(prov.Delivered()[7]) == n } }

	require.NoError(t, in.Handle(ctx, []inbox.Message{event(t, 7, 1), event(t, 7, 2), event(t, 7, 3)}))
	wait.On(t, 30*time.Second, "user 7's first three SMS", sent.Next, delivered(3))
	wait.On(t, 10*time.Second, "their records", sent.Next, func() bool {
		var last int64
		return pool.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = 7`).Scan(&last) == nil && last == 3
	})

	// An hour later, for retention: a window of a minute prunes all three rows.
	_, err = pool.Exec(ctx, `UPDATE notify.notifications SET finished_at = finished_at - interval '1 hour' WHERE user_id = 7`)
	require.NoError(t, err)
	n, err := gates.PruneInbox(ctx, time.Minute, 100)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	require.NoError(t, in.Handle(ctx, []inbox.Message{event(t, 7, 2), event(t, 7, 3), event(t, 7, 4)}))
	wait.On(t, 30*time.Second, "user 7's seq 4", sent.Next, delivered(4))
	require.Equal(t, []int64{1, 2, 3, 4}, prov.Delivered()[7], "each once, in order: the copies were not sent again")
	for _, seq := range []int64{2, 3} {
		calls := prov.Calls(func(c smsprovider.Call) bool { return c.UserID == 7 && c.Seq == seq })
		require.Len(t, calls, 1, "seq %d reached the provider once", seq)
	}
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE user_id = 7 AND seq <= 3`).Scan(&rows))
	require.Zero(t, rows, "the copies were not stored again")
}

// TestRetentionPrunesOnlyPublishedBadMessages: a bad message goes once it has been in the DLQ
// topic longer than the window; one whose dead-letter intent is not yet published stays,
// however old, and so does one published recently.
func TestRetentionPrunesOnlyPublishedBadMessages(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at, dlq_published_at) VALUES
			('old-published', 'broker-a/0', 1, 'x', 'bad', now() - interval '3 hours', now() - interval '2 hours'),
			('old-published-2', 'broker-a/0', 2, 'x', 'bad', now() - interval '3 hours', now() - interval '2 hours'),
			('old-unpublished', 'broker-a/0', 3, 'x', 'bad', now() - interval '3 hours', NULL),
			('old-just-published', 'broker-a/0', 4, 'x', 'bad', now() - interval '3 hours', now())`)
	require.NoError(t, err)
	bad := inbox.NewStore(pool)
	age, err := bad.OldestBad(ctx)
	require.NoError(t, err)
	require.InDelta(t, (2 * time.Hour).Seconds(), age.Seconds(), 60, "by publication, not receipt")
	n, err := bad.PruneBad(ctx, time.Hour, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "at most a batch")
	n, err = bad.PruneBad(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	rows, err := pool.Query(ctx, `SELECT msg_id FROM notify.bad_messages ORDER BY msg_id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"old-just-published", "old-unpublished"}, left)
	intents, err := bad.BadIntents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, intents, 1, "the unpublished one is still there for the DLQ publisher")
	age, err = bad.OldestBad(ctx)
	require.NoError(t, err)
	require.Less(t, age, time.Minute)
}
