package wallet_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// whole is the slice of a one-queue route: every event.
var whole = wallet.QueueSlice{Count: 1}

func TestOutboxPendingAndMarkPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a, b := e.user(t), e.user(t)
	_, err := e.pool.Exec(e.ctx, `UPDATE users SET locale = 'en', phone = '+12025550123' WHERE id = $1`, b)
	require.NoError(t, err)
	id := e.sagaID(t, a)
	// Interleave the two users' changes.
	for i := range 3 {
		for _, u := range []int64{a, b} {
			_, err := e.apply(e.ctx, wallet.Change{UserID: u, SagaID: id, Step: fmt.Sprintf("s%d", i), Amount: 100, Kind: walletevent.Deposit})
			require.NoError(t, err)
		}
	}
	out := wallet.NewOutboxStore(e.pool, 1, 0)
	waitSettled(t, e)
	page, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	pend := page.Events
	require.Len(t, pend, 6)
	require.Equal(t, pend[5].ID, page.Last, "the highest id seen")
	require.Positive(t, page.Horizon)
	next := map[int64]int64{a: 1, b: 1}
	prev := map[int64]int64{}
	for i, p := range pend {
		if i > 0 {
			require.Greater(t, p.ID, pend[i-1].ID, "oldest first")
		}
		require.Equal(t, next[p.UserID], p.Seq, "each user's in seq order")
		next[p.UserID]++
		require.Equal(t, prev[p.UserID], p.Pred, "the unpublished predecessor")
		prev[p.UserID] = p.ID
		ev, err := walletevent.Decode(p.Body)
		require.NoError(t, err)
		require.Equal(t, p.ID, ev.EventID)
		require.Equal(t, p.UserID, ev.UserID)
		require.Equal(t, p.Seq, ev.Seq)
		require.Equal(t, walletevent.Deposit, ev.Kind)
		require.Equal(t, string(ev.Kind), p.Kind)
		require.Equal(t, int64(100), ev.Amount)
		require.Equal(t, 100*p.Seq, ev.BalanceAfter)
		require.Equal(t, "CNY", ev.Currency)
		require.Equal(t, id, ev.SagaID)
		require.False(t, ev.OccurredAt.IsZero())
		require.Equal(t, ev.OccurredAt, p.OccurredAt)
		require.Equal(t, []string{strconv.FormatInt(p.ID, 10), ev.SeqKey()}, p.Keys)
		if p.UserID == b {
			require.Equal(t, "en", ev.Locale)
			require.Equal(t, "+12025550123", ev.Phone)
		} else {
			require.Equal(t, "zh-CN", ev.Locale)
		}
	}

	// A smaller limit gives a prefix of each user's stream; skip leaves ids out.
	two, err := out.Pending(e.ctx, whole, 0, 0, nil, 2)
	require.NoError(t, err)
	require.Equal(t, pend[:2], two.Events)
	skipped, err := out.Pending(e.ctx, whole, 0, 0, []int64{pend[0].ID, pend[3].ID}, 100)
	require.NoError(t, err)
	require.Equal(t, []wallet.PendingEvent{pend[1], pend[2], pend[4], pend[5]}, skipped.Events)
	// From a cursor on, only later ids (nothing is late: every writer had finished before
	// the horizon).
	after, err := out.Pending(e.ctx, whole, pend[3].ID, page.Horizon, nil, 100)
	require.NoError(t, err)
	require.Equal(t, pend[4:], after.Events)

	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{pend[0].ID}, []string{"msg-1"}))
	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{pend[0].ID}, []string{"msg-again"}), "at least once: marking twice is fine")
	var msgID string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT msg_id FROM wallet_events WHERE id = $1`, pend[0].ID).Scan(&msgID))
	require.Equal(t, "msg-1", msgID, "the first message id stays")
	rest, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Equal(t, pend[1].ID, rest.Events[0].ID)
	require.Zero(t, rest.Events[1].Pred, "a's seq 2 follows a published event")

	evs, err := e.svc.ListEvents(e.ctx, pend[0].UserID, wallet.EventFilter{})
	require.NoError(t, err)
	require.True(t, evs[0].Published)
	require.False(t, evs[1].Published)

	// The committer marks many in one statement.
	var ids []int64
	var msgIDs []string
	for i, p := range pend[1:] {
		ids = append(ids, p.ID)
		msgIDs = append(msgIDs, fmt.Sprintf("batch-%d", i))
	}
	require.NoError(t, out.MarkPublishedBatch(e.ctx, ids, msgIDs))
	rest, err = out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Empty(t, rest.Events, "the batch marked every remaining event")
	require.Equal(t, pend[5].ID, rest.Last)
	require.NoError(t, out.MarkPublishedBatch(e.ctx, ids, msgIDs), "marking twice is fine")
	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{ids[0], 1 << 40}, []string{"a", "b"}),
		"an id no longer in the outbox was published, then pruned: there is nothing left to mark")
	_, err = out.Pending(e.ctx, wallet.QueueSlice{Count: 2, Index: 2}, 0, 0, nil, 1)
	require.Error(t, err, "no such queue")
}

// TestOutboxKeyHashIsJavasStringHash: the key hash the outbox stores and filters by is the
// relay's, for Java's hash and for FNV: the SQL functions agree with ordering's for ids from
// 1 on and for random ones up to the largest int64, and each event is in exactly the queue
// slice the producer would send its user to, for several queue counts.
func TestOutboxKeyHashIsJavasStringHash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	rng := rand.New(rand.NewPCG(7, 11))
	ids := []int64{0, 1, 9, 10, 42, 11111, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MaxInt32 + 1, -1}
	for i := int64(1); i <= 2000; i++ {
		ids = append(ids, i)
	}
	for range 2000 {
		ids = append(ids, rng.Int64(), -rng.Int64())
	}
	rows, err := e.pool.Query(e.ctx, `SELECT id, wallet_key_hash(id), wallet_key_hash_fnv(id) FROM unnest($1::bigint[]) AS id`, ids)
	require.NoError(t, err)
	type hashes struct {
		ID   int64
		Java int32
		FNV  int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[hashes])
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for _, h := range got {
		key := strconv.FormatInt(h.ID, 10)
		require.Equal(t, ordering.JavaStringHash(key), h.Java, "java hash of %s", key)
		for _, n := range []int{1, 7, 8, 64} {
			require.Equal(t, ordering.HashFNV.Slot(key, n), int(h.FNV%int64(n)), "fnv slot of %s among %d", key, n)
		}
	}

	// Real events of 40 users: the stored key hash, and the slices.
	sid := e.sagaID(t, e.user(t))
	users := map[int64]bool{}
	for range 40 {
		u := e.user(t)
		users[u] = true
		for s := range 2 {
			_, err := e.apply(e.ctx, wallet.Change{UserID: u, SagaID: sid, Step: fmt.Sprintf("k%d", s), Amount: 5, Kind: walletevent.Deposit})
			require.NoError(t, err)
		}
	}
	var mismatched int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM wallet_events WHERE key_hash <> wallet_key_hash(user_id)`).Scan(&mismatched))
	require.Zero(t, mismatched)
	out := wallet.NewOutboxStore(e.pool, 1, 0)
	for _, hash := range []ordering.KeyHash{ordering.HashJava, ordering.HashFNV} {
		for _, n := range []int{1, 3, 8} {
			seen := map[int64]int{}
			for i := range n {
				page, err := out.Pending(e.ctx, wallet.QueueSlice{FNV: hash == ordering.HashFNV, Count: n, Index: i}, 0, 0, nil, 1000)
				require.NoError(t, err)
				for _, ev := range page.Events {
					if !users[ev.UserID] {
						continue
					}
					require.Equal(t, hash.Slot(strconv.FormatInt(ev.UserID, 10), n), i, "user %d (%s, %d queues)", ev.UserID, hash, n)
					seen[ev.ID]++
				}
			}
			require.Len(t, seen, 80, "%s over %d queues: every event in one slice", hash, n)
		}
	}
}

// TestOutboxPendingFindsRowsThatCommitLate: an event's id is taken before its transaction
// commits, so a cursor can pass the id of an event that commits later. The read's horizon
// names the transactions still running; the next read from that cursor returns the event
// that committed below it.
func TestOutboxPendingFindsRowsThatCommitLate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a, b := e.user(t), e.user(t)
	sid := e.sagaID(t, a)
	out := wallet.NewOutboxStore(e.pool, 1, 0)

	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer tx.Rollback(e.ctx) //nolint:errcheck // committed below; a failed test leaves nothing else to undo
	late, err := wallet.ApplyChange(e.ctx, tx, wallet.Change{UserID: a, SagaID: sid, Step: "late", Amount: 7, Kind: walletevent.Deposit})
	require.NoError(t, err)
	early, err := e.apply(e.ctx, wallet.Change{UserID: b, SagaID: sid, Step: "early", Amount: 9, Kind: walletevent.Deposit})
	require.NoError(t, err)
	require.Less(t, late.EventID, early.EventID, "the open transaction took the lower id")

	first, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Len(t, first.Events, 1)
	require.Equal(t, early.EventID, first.Events[0].ID, "the open transaction's event is not visible yet")
	require.Equal(t, early.EventID, first.Last, "the cursor may move past the open event's id")

	require.NoError(t, tx.Commit(e.ctx))
	second, err := out.Pending(e.ctx, whole, first.Last, first.Horizon, []int64{early.EventID}, 100)
	require.NoError(t, err)
	require.Len(t, second.Events, 1, "the event committed below the cursor comes back")
	require.Equal(t, late.EventID, second.Events[0].ID)
	require.Zero(t, second.Events[0].Pred)
	require.GreaterOrEqual(t, second.Horizon, first.Horizon)

	// Without the horizon (a plain id cursor) it would be lost.
	plain, err := out.Pending(e.ctx, whole, first.Last, second.Horizon+1_000_000, nil, 100)
	require.NoError(t, err)
	require.Empty(t, plain.Events)
}

// waitSettled waits until every transaction that wrote an event so far has ended, and so has
// every older one on the cluster (which other tests share): a read's horizon then lies past
// all of them, and none of their events can come back as late.
func waitSettled(t *testing.T, e *env) {
	t.Helper()
	wait.Until(t, 30*time.Second, "every older transaction of the cluster to end", func() bool {
		var settled bool
		require.NoError(t, e.pool.QueryRow(e.ctx,
			`SELECT pg_snapshot_xmin(pg_current_snapshot()) > COALESCE((SELECT max(xact) FROM wallet_events), '0')`).Scan(&settled))
		return settled
	})
}

// An id given twice in one batch (the relay's old and new pump of a queue that moved both
// confirmed it while the marks were held up) is marked once, with the first of its message
// ids; it is not taken for an unknown event, which would make the relay retry the batch, and
// every mark queued behind it, for ever.
func TestOutboxMarksAnIDGivenTwiceInOneBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a := e.user(t)
	id := e.sagaID(t, a)
	for i := range 2 {
		_, err := e.apply(e.ctx, wallet.Change{UserID: a, SagaID: id, Step: fmt.Sprintf("s%d", i), Amount: 100, Kind: walletevent.Deposit})
		require.NoError(t, err)
	}
	out := wallet.NewOutboxStore(e.pool, 1, 0)
	waitSettled(t, e)
	page, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Len(t, page.Events, 2)
	first, second := page.Events[0].ID, page.Events[1].ID
	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{first, second, first}, []string{"old-pump", "b", "new-pump"}))
	var msgID string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT msg_id FROM wallet_events WHERE id = $1`, first).Scan(&msgID))
	require.Equal(t, "old-pump", msgID, "the first message id given")
	rest, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Empty(t, rest.Events, "both marked")
}

// TestAChangeHandsOverItsEventAsTheRelayReadsIt: what a committed change hands to the relay
// (Applied.Event) is the row as Pending reads it, with the predecessor as it stood at the
// commit; and Strays finds the unpublished rows nobody holds.
func TestAChangeHandsOverItsEventAsTheRelayReadsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a := e.user(t)
	id := e.sagaID(t, a)
	var got []wallet.Applied
	for i := range 2 {
		ap, err := e.apply(e.ctx, wallet.Change{UserID: a, SagaID: id, Step: fmt.Sprintf("s%d", i), Amount: 100, Kind: walletevent.Deposit,
			Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
		require.NoError(t, err)
		require.True(t, ap.PredKnown)
		got = append(got, ap)
	}
	out := wallet.NewOutboxStore(e.pool, 1, 0)
	waitSettled(t, e)
	page, err := out.Pending(e.ctx, whole, 0, 0, nil, 100)
	require.NoError(t, err)
	require.Len(t, page.Events, 2)
	for i, ev := range page.Events {
		require.Equal(t, ev, got[i].Event, "event %d handed over as read", i)
	}
	require.Zero(t, got[0].Event.Pred, "seq 1 has no predecessor")
	require.Equal(t, got[0].EventID, got[1].Event.Pred, "the unpublished predecessor")

	strays, err := out.Strays(e.ctx, nil, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{a, a}, strays)
	strays, err = out.Strays(e.ctx, []int64{got[0].EventID}, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{a}, strays, "held ids are left out")
	strays, err = out.Strays(e.ctx, nil, time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, strays, "younger than olderThan")

	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{got[0].EventID, got[1].EventID}, []string{"m1", "m2"}))
	third, err := e.apply(e.ctx, wallet.Change{UserID: a, SagaID: id, Step: "s2", Amount: 100, Kind: walletevent.Deposit})
	require.NoError(t, err)
	require.True(t, third.PredKnown)
	require.Zero(t, third.Event.Pred, "the predecessor was published at the commit")
	require.Equal(t, int64(3), third.Event.Seq)
	strays, err = out.Strays(e.ctx, nil, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{a}, strays, "published rows are no strays")
}
