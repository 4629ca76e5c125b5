package wallet_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// TestRetention: a day later, retention prunes the published outbox row but never the
// unpublished one (whose pruned predecessor then counts as published), the finished sagas
// (a pruned saga is 410, its operation row marked in the same commit and left out of the
// user's list, its ledger entries stay), the operation rows of pruned sagas once their own
// window passed (the saga is then 404), and the idempotency keys: a key used again after its
// window is a new request, which starts a saga of its own, as docs/API.md says; within its
// window it answers with the first saga.
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

	age, err = e.svc.OldestFinishedSaga(e.ctx)
	require.NoError(t, err)
	require.InDelta(t, (24 * time.Hour).Seconds(), age.Seconds(), 60)
	n, err = e.svc.PruneSagas(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	_, err = e.svc.GetSaga(e.ctx, first.ID)
	require.Equal(t, apperr.Gone, apperr.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "pruned")
	var marked int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM wallet_operations WHERE user_id = $1 AND pruned_at IS NOT NULL`, user).Scan(&marked))
	require.Equal(t, 2, marked, "each pruned saga's operation row is marked with it")
	page2, err := e.svc.ListSagas(e.ctx, wallet.SagaFilter{UserID: user})
	require.NoError(t, err)
	require.Empty(t, page2.Items, "the user's list has no pruned saga")
	require.Equal(t, wallet.Money(200), e.balance(t, user))
	var ledger int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM ledger_entries WHERE user_id = $1`, user).Scan(&ledger))
	require.Equal(t, 2, ledger, "the ledger is never pruned")

	n, err = e.svc.PruneOperations(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.Zero(t, n, "an operation row stays its own window after its saga was pruned")
	_, err = e.pool.Exec(e.ctx, `UPDATE wallet_operations SET pruned_at = pruned_at - interval '1 day' WHERE user_id = $1`, user)
	require.NoError(t, err)
	age, err = e.svc.OldestPrunedOperation(e.ctx)
	require.NoError(t, err)
	require.InDelta(t, (24 * time.Hour).Seconds(), age.Seconds(), 60)
	n, err = e.svc.PruneOperations(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	age, err = e.svc.OldestPrunedOperation(e.ctx)
	require.NoError(t, err)
	require.Zero(t, age)
	_, err = e.svc.GetSaga(e.ctx, first.ID)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err), "once its row is gone too, the saga is not found: %v", err)

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

// TestWaitSagaOnAPrunedSagaIsGoneAsGetSaga: waiting on a saga retention pruned answers as
// GetSaga does, 410 gone with the same message while the wallet's row is kept, then 404 not
// found once it is gone too, like an id that never was a saga.
func TestWaitSagaOnAPrunedSagaIsGoneAsGetSaga(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	user := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100})
	require.NoError(t, err)
	e.wait(t, op.ID)
	_, err = e.pool.Exec(e.ctx, `UPDATE sagas SET updated_at = updated_at - interval '1 day'`)
	require.NoError(t, err)
	n, err := e.svc.PruneSagas(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	both := func() (getErr, waitErr error) {
		t.Helper()
		_, getErr = e.svc.GetSaga(e.ctx, op.ID)
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		_, waitErr = e.svc.WaitSaga(ctx, op.ID)
		require.NoError(t, ctx.Err(), "WaitSaga answered at once, without waiting out its context")
		return getErr, waitErr
	}
	getErr, waitErr := both()
	require.Equal(t, apperr.Gone, apperr.CodeOf(getErr), "%v", getErr)
	require.Equal(t, apperr.Gone, apperr.CodeOf(waitErr), "%v", waitErr)
	require.Equal(t, getErr.Error(), waitErr.Error())

	_, err = e.pool.Exec(e.ctx, `UPDATE wallet_operations SET pruned_at = pruned_at - interval '1 day'`)
	require.NoError(t, err)
	n, err = e.svc.PruneOperations(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	getErr, waitErr = both()
	require.Equal(t, apperr.NotFound, apperr.CodeOf(getErr), "%v", getErr)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(waitErr), "%v", waitErr)
	require.Equal(t, getErr.Error(), waitErr.Error())
}

// TestRetentionPrunesTheAuditOfSagasNoLongerKept: an operator audit row older than its window
// goes once its saga was pruned (its operation row marked, or gone); the trail of a saga
// still kept stays however old, and so does a recent row.
func TestRetentionPrunesTheAuditOfSagasNoLongerKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	user := e.user(t)
	var kept, pruned []int64
	for range 2 {
		op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100})
		require.NoError(t, err)
		kept = append(kept, e.wait(t, op.ID).ID)
		op, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: 100})
		require.NoError(t, err)
		pruned = append(pruned, e.wait(t, op.ID).ID)
	}
	_, err := e.pool.Exec(e.ctx, `UPDATE sagas SET updated_at = updated_at - interval '1 day' WHERE id = ANY($1)`, pruned)
	require.NoError(t, err)
	_, err = e.pool.Exec(e.ctx, `
		INSERT INTO audit (at, actor, action, saga_id, reason) VALUES
			(now() - interval '2 days', 'ops', 'resolve_saga', $1, 'old, saga kept'),
			(now() - interval '2 days', 'ops', 'resolve_saga', $2, 'old, saga pruned'),
			(now() - interval '2 days', 'ops', 'resolve_saga', $3, 'old, saga pruned, its row gone'),
			(now(), 'ops', 'resolve_saga', $3, 'recent, saga pruned'),
			(now() - interval '2 days', 'ops', 'retry_saga', $4, 'old, saga kept')`,
		kept[0], pruned[0], pruned[1], kept[1])
	require.NoError(t, err)
	n, err := e.svc.PruneSagas(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	_, err = e.pool.Exec(e.ctx, `DELETE FROM wallet_operations WHERE saga_id = $1`, pruned[1])
	require.NoError(t, err)

	age, err := e.svc.OldestAudit(e.ctx)
	require.NoError(t, err)
	require.InDelta(t, (48 * time.Hour).Seconds(), age.Seconds(), 60, "the oldest row of a saga no longer kept")
	n, err = e.svc.PruneAudit(e.ctx, time.Hour, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "at most a batch")
	n, err = e.svc.PruneAudit(e.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	rows, err := e.pool.Query(e.ctx, `SELECT reason FROM audit ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"old, saga kept", "recent, saga pruned", "old, saga kept"}, left)
	age, err = e.svc.OldestAudit(e.ctx)
	require.NoError(t, err)
	require.Less(t, age, time.Minute, "what is left to prune one day is the recent row")
	items, err := e.svc.SagaAudit(e.ctx, kept[0])
	require.NoError(t, err)
	require.Len(t, items, 1, "a kept saga's trail is whole")
}
