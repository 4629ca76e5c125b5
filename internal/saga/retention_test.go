package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestPruneTakesOnlyFinishedSagas: of sagas in every state, finished a day ago or just now,
// Prune deletes those that finished (completed, compensated, failed, resolved) before the
// window, with their history; a saga that runs, compensates or needs an operator stays,
// however old. The caller is told the ids in the transaction that deletes them, and a caller
// that fails rolls the batch back.
func TestPruneTakesOnlyFinishedSagas(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	for _, st := range saga.States {
		_, err := pool.Exec(ctx, `
			INSERT INTO sagas (kind, state, updated_at, history) VALUES ('k', $1, now() - interval '1 day', $2), ('k', $1, now(), $2)`,
			string(st), `[{"step": 0, "name": "step", "phase": "forward", "status": "done", "attempts": 1}]`)
		require.NoError(t, err)
	}
	e := saga.New(pool, saga.Options{})
	age, err := e.OldestFinished(ctx)
	require.NoError(t, err)
	require.InDelta(t, (24 * time.Hour).Seconds(), age.Seconds(), 60)

	refused := errors.New("the caller's rows refused")
	n, err := e.Prune(ctx, time.Hour, 100, func(context.Context, pgx.Tx, []int64) error { return refused })
	require.ErrorIs(t, err, refused)
	require.Zero(t, n)
	var finished int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM sagas WHERE state IN ('completed', 'compensated', 'failed', 'resolved')`).Scan(&finished))
	require.Equal(t, 8, finished, "a caller that fails rolls the batch back: nothing is deleted")

	var told []int64
	tell := func(ctx context.Context, tx pgx.Tx, ids []int64) error {
		var there int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sagas WHERE id = ANY($1)`, ids).Scan(&there); err != nil {
			return err
		}
		require.Zero(t, there, "told in the transaction that deleted them")
		told = append(told, ids...)
		return nil
	}
	n, err = e.Prune(ctx, time.Hour, 3, tell)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "at most a batch")
	n, err = e.Prune(ctx, time.Hour, 100, tell)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Len(t, told, 4, "the caller is told each pruned saga once")
	n, err = e.Prune(ctx, time.Hour, 100, nil)
	require.NoError(t, err)
	require.Zero(t, n)

	rows, err := pool.Query(ctx, `SELECT state, count(*) FROM sagas GROUP BY state ORDER BY state`)
	require.NoError(t, err)
	left := map[string]int{}
	for rows.Next() {
		var st string
		var c int
		require.NoError(t, rows.Scan(&st, &c))
		left[st] = c
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"running": 2, "compensating": 2, "needs_attention": 2,
		"completed": 1, "compensated": 1, "failed": 1, "resolved": 1}, left)
	age, err = e.OldestFinished(ctx)
	require.NoError(t, err)
	require.Less(t, age, time.Hour)
}
