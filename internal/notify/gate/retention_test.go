package gate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestRetentionPrunesOnlyWhatIsFinished: of an hour-old inbox, only rows at or below their
// user's position that are sent, skipped, or dead-lettered and published go; a pending row,
// a dead letter whose DLQ intent is not yet published, and recent rows stay; the users'
// positions are untouched. Wake rows go only when they wake nobody.
func TestRetentionPrunesOnlyWhatIsFinished(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	s := NewStore(pool)
	_, err := pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, due_at) VALUES (1, 4, NULL), (2, 1, NULL), (3, 0, now() + interval '1 minute'), (4, 2, NULL);
		INSERT INTO notify.notifications (user_id, seq, status, finished_at, dlq_published_at) VALUES
			(1, 1, 'sent', now() - interval '2 hours', NULL),
			(1, 2, 'dead_lettered', now() - interval '2 hours', now() - interval '2 hours'),
			(1, 3, 'dead_lettered', now() - interval '2 hours', NULL),
			(1, 4, 'skipped_by_operator', now() - interval '2 hours', NULL),
			(1, 5, 'pending', NULL, NULL),
			(2, 1, 'sent', now() - interval '1 minute', NULL),
			(2, 2, 'pending', NULL, NULL),
			(4, 1, 'sent', now() - interval '2 hours', NULL),
			(4, 2, 'sent', now() - interval '2 hours', NULL);
		INSERT INTO notify.sms_log (user_id, seq, phone, text, sent_at) VALUES
			(1, 1, '+8613800000000', 'a', now() - interval '2 hours'), (2, 1, '+8613800000000', 'b', now() - interval '1 minute');
		-- Hour-old wakes: user 1 waits for nothing it can be sent (5 is pending, idle: this
		-- wake alone brings it to a lane), user 2 likewise; user 3 is due anyway, user 4 has
		-- nothing pending, user 9 has no position. A recent wake of user 4 stays.
		INSERT INTO notify.wakes (user_id, at) VALUES
			(1, now() - interval '2 hours'), (2, now() - interval '2 hours'), (3, now() - interval '2 hours'),
			(4, now() - interval '2 hours'), (9, now() - interval '2 hours'), (4, now())`)
	require.NoError(t, err)

	n, err := s.PruneInbox(ctx, time.Hour, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "at most a batch")
	n, err = s.PruneInbox(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	rows, err := pool.Query(ctx, `SELECT user_id || '/' || seq FROM notify.notifications ORDER BY user_id, seq`)
	require.NoError(t, err)
	var kept []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kept = append(kept, k)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"1/3", "1/5", "2/1", "2/2"}, kept,
		"kept: a dead letter not yet published to the DLQ, pending rows, a row inside the window")
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM notify.progress`), "positions are never pruned")
	age, err := s.OldestInbox(ctx)
	require.NoError(t, err)
	require.InDelta(t, (2 * time.Hour).Seconds(), age.Seconds(), 60, "the unpublished dead letter is the oldest finished row")

	n, err = s.PruneSMSLog(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	age, err = s.OldestSMSLog(ctx)
	require.NoError(t, err)
	require.InDelta(t, time.Minute.Seconds(), age.Seconds(), 30)

	n, err = s.PruneWakes(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id = 1`), "the wake that brings user 1's seq 5 to a lane stays")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id = 2`), "and user 2's seq 2")
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id IN (3, 9)`), "user 3 is due anyway; user 9 has no position")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.wakes WHERE user_id = 4`), "user 4's recent wake stays")

	finished, err := s.Finished(ctx, 1, 2)
	require.NoError(t, err)
	require.True(t, finished, "seq 2 is behind user 1's position")
	finished, err = s.Finished(ctx, 1, 5)
	require.NoError(t, err)
	require.False(t, finished)
}
