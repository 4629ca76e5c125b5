package wallet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// TestRetention: a day later, retention prunes the published outbox row but never the
// unpublished one (whose pruned predecessor then counts as published), the finished sagas
// (a pruned saga is 410, its ledger entries stay), and the idempotency keys: a key used
// again after its window is a new request, which starts a saga of its own, as the README
// says; within its window it answers with the first saga.
func TestRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	user := e.user(t)
	first, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100, IdempotencyKey: "top-up-1"})
	require.NoError(t, err)
	first = e.wait(t, first.ID)
	second, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100, IdempotencyKey: "top-up-2"})
	require.NoError(t, err)
	e.wait(t, second.ID)
	again, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100, IdempotencyKey: "top-up-1"})
	require.NoError(t, err)
	require.True(t, again.Replayed, "within its window a key answers with its saga")
	require.Equal(t, first.ID, again.ID)

	out := wallet.NewOutboxStore(e.pool, 1, time.Second)
	whole := wallet.QueueSlice{Count: 1}
	page, err := out.Pending(e.ctx, whole, 0, 0, nil, 10)
	require.NoError(t, err)
	require.Len(t, page.Events, 2)
	require.NoError(t, out.MarkPublishedBatch(e.ctx, []int64{page.Events[0].ID}, []string{"m-1"}))
	_, err = e.pool.Exec(e.ctx, `
		UPDATE wallet_events SET occurred_at = occurred_at - interval '1 day', published_at = published_at - interval '1 day';
		UPDATE sagas SET updated_at = updated_at - interval '1 day', created_at = created_at - interval '1 day';
		UPDATE idempotency_keys SET created_at = created_at - interval '1 day'`)
	require.NoError(t, err)

	age, err := out.OldestPublished(e.ctx)
	require.NoError(t, err)
	require.InDelta(t, (24 * time.Hour).Seconds(), age.Seconds(), 60)
	n, err := out.PrunePublished(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only the published event")
	page, err = out.Pending(e.ctx, whole, 0, 0, nil, 10)
	require.NoError(t, err)
	require.Len(t, page.Events, 1, "the unpublished event is never pruned, however old")
	require.Equal(t, int64(2), page.Events[0].Seq)
	require.Zero(t, page.Events[0].Pred, "its pruned predecessor was published")
	age, err = out.OldestPublished(e.ctx)
	require.NoError(t, err)
	require.Zero(t, age, "no published event is left")

	n, err = e.eng.Prune(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	_, err = e.svc.GetSaga(e.ctx, first.ID)
	require.Equal(t, apperr.Gone, apperr.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "pruned")
	require.Equal(t, wallet.Money(200), e.balance(t, user))
	var ledger int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM ledger_entries WHERE user_id = $1`, user).Scan(&ledger))
	require.Equal(t, 2, ledger, "the ledger is never pruned")

	n, err = e.svc.PruneIdempotencyKeys(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	age, err = e.svc.OldestIdempotencyKey(e.ctx)
	require.NoError(t, err)
	require.Zero(t, age)
	later, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100, IdempotencyKey: "top-up-1"})
	require.NoError(t, err)
	require.False(t, later.Replayed, "a key used again after its window is a new request")
	require.NotEqual(t, first.ID, later.ID)
	require.Equal(t, saga.Completed, e.wait(t, later.ID).State)
	require.Equal(t, wallet.Money(300), e.balance(t, user))
}

// TestPruningSkipsLockedRows: a row another session holds locked (a mark in flight, another
// replica's pruner) is skipped, not waited for; the next pass takes it once it is free.
func TestPruningSkipsLockedRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	user := e.user(t)
	e.fund(t, user, 100)
	e.fund(t, user, 100)
	_, err := e.pool.Exec(e.ctx, `UPDATE wallet_events SET published_at = now() - interval '1 day', msg_id = 'm'`)
	require.NoError(t, err)
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer tx.Rollback(e.ctx) //nolint:errcheck // committed below
	_, err = tx.Exec(e.ctx, `SELECT 1 FROM wallet_events WHERE user_id = $1 AND seq = 1 FOR UPDATE`, user)
	require.NoError(t, err)

	out := wallet.NewOutboxStore(e.pool, 1, time.Second)
	n, err := out.PrunePublished(e.ctx, time.Hour, 100)
	require.NoError(t, err, "no wait behind the lock")
	require.EqualValues(t, 1, n, "the free row only")
	require.NoError(t, tx.Commit(e.ctx))
	n, err = out.PrunePublished(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the other, once free")
}
