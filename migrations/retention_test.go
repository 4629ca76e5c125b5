package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/migrations"
)

// TestOperationsMigrationMarksTheRowsOfPrunedSagas: on a database where sagas were pruned
// before the wallet marked its rows (00018's retention), 00022 marks the operation rows whose
// saga is gone and only those, moves a user's list to indexes of the kept rows, and goes down
// and up again.
func TestOperationsMigrationMarksTheRowsOfPrunedSagas(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool
	p, err := migrations.Wallet.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 18)
	require.NoError(t, err)

	var user int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO users (name, phone) VALUES ('Old Sagas', '+8613800138000') RETURNING id`).Scan(&user))
	_, err = pool.Exec(ctx, `INSERT INTO sagas (id, kind, state) VALUES (1, 'deposit', 'completed'), (3, 'deposit', 'needs_attention')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency)
		SELECT g, 'deposit', $1, 100, 'CNY' FROM generate_series(1, 4) g`, user) // sagas 2 and 4 were pruned
	require.NoError(t, err)

	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
	var marked []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(saga_id ORDER BY saga_id) FROM wallet_operations WHERE pruned_at IS NOT NULL`).Scan(&marked))
	require.Equal(t, []int64{2, 4}, marked, "the rows whose saga is gone, and only those")
	indexes := func() []string {
		t.Helper()
		var names []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes
			WHERE tablename = 'wallet_operations' AND indexname <> 'wallet_operations_pkey'`).Scan(&names))
		return names
	}
	require.Equal(t, []string{"wallet_operations_counterparty_kept_idx", "wallet_operations_pruned_idx", "wallet_operations_user_kept_idx"}, indexes())

	_, err = p.DownTo(ctx, 18)
	require.NoError(t, err)
	require.Equal(t, []string{"wallet_operations_counterparty_idx", "wallet_operations_user_idx"}, indexes())
	var rowsLeft int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM wallet_operations`).Scan(&rowsLeft))
	require.Equal(t, 4, rowsLeft, "down keeps the rows")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
}
