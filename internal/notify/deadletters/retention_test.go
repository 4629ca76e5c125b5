package deadletters_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestRetentionPrunesTheAuditOfSMSNoLongerInTheInbox: an operator audit row older than its
// window goes once the SMS it names is no longer in the inbox (retention pruned it); while
// the SMS is there, its rows stay, however old: a replayed dead letter still counts as
// replayed (the DLQ depth, a replay's fence). A recent row stays too.
func TestRetentionPrunesTheAuditOfSMSNoLongerInTheInbox(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	seedUser1(t, pool) // user 1 seq 2 is a dead letter in the inbox
	_, err := pool.Exec(ctx, `
		INSERT INTO notify.audit (at, actor, action, user_id, seq, reason) VALUES
			(now() - interval '2 days', 'ops', $1, 1, 2, 'old, its dead letter in the inbox'),
			(now() - interval '2 days', 'ops', $1, 7, 1, 'old, its SMS pruned'),
			(now() - interval '2 days', 'ops', $2, 7, 2, 'old skip, its SMS pruned'),
			(now(), 'ops', $1, 7, 3, 'recent, its SMS pruned')`, deadletters.ActionReplay, deadletters.ActionSkip)
	require.NoError(t, err)
	depth, err := smslog.NewStore(pool).DLQDepth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth, "the dead letter was replayed")

	op := operator(pool, nil)
	age, err := op.OldestAudit(ctx)
	require.NoError(t, err)
	require.InDelta(t, (48 * time.Hour).Seconds(), age.Seconds(), 60)
	n, err := op.PruneAudit(ctx, time.Hour, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "at most a batch")
	n, err = op.PruneAudit(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	rows, err := pool.Query(ctx, `SELECT reason FROM notify.audit ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"old, its dead letter in the inbox", "recent, its SMS pruned"}, left)
	depth, err = smslog.NewStore(pool).DLQDepth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth, "the dead letter still counts as replayed")
	age, err = op.OldestAudit(ctx)
	require.NoError(t, err)
	require.Less(t, age, time.Minute)
}
