package wallet

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestAUsersListDoesNotWalkPrunedSagas runs the statement behind a user's saga list under
// EXPLAIN ANALYZE for a user whose 5,000 newest sagas were pruned (their operation rows
// marked, kept for a while to answer 410) and whose 10 older ones are kept: it returns the
// kept ones and visits about as many rows, never the pruned ones, as payer or as payee.
func TestAUsersListDoesNotWalkPrunedSagas(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var user, other int64
	require.NoError(t, pool.QueryRow(ctx, `
WITH u AS (INSERT INTO users (name, phone) SELECT 'user ' || g, '+8613800138000' FROM generate_series(1, 2) g RETURNING id)
SELECT min(id), max(id) FROM u`).Scan(&user, &other))
	// Sagas 1–10 kept (the user pays in the odd ones, receives in the even ones), 11–5010
	// pruned; the other user's 5,000 kept ones beside them.
	_, err := pool.Exec(ctx, `
INSERT INTO wallet_operations (saga_id, kind, user_id, counterparty_id, amount, currency, pruned_at)
SELECT g, 'transfer', CASE WHEN g % 2 = 1 THEN $1::bigint ELSE $2::bigint END, CASE WHEN g % 2 = 1 THEN $2::bigint ELSE $1::bigint END,
       1, 'CNY', CASE WHEN g > 10 THEN now() END
FROM generate_series(1, 5010) g`, user, other)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency)
SELECT g, 'deposit', $1, 1, 'CNY' FROM generate_series(5011, 10010) g`, other)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE wallet_operations`)
	require.NoError(t, err)

	listArgs := pg.Args{"user_id": user, "before": int64(math.MaxInt64), "limit": 201}
	var plan string
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+listUserOperationsSQL, listArgs).Scan(&plan))
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &out))
	require.Len(t, out, 1)
	visited := out[0].Plan.visitedOf("wallet_operations")
	rows, err := pool.Query(ctx, listUserOperationsSQL, listArgs)
	require.NoError(t, err)
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (operationRow, error) { return scanOperationRow(r) })
	require.NoError(t, err)
	var ids []int64
	for _, op := range ops {
		require.False(t, op.Pruned)
		ids = append(ids, op.SagaID)
	}
	require.Equal(t, []int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, ids, "the kept sagas, newest first, as payer and payee")
	t.Logf("a user's list beside 5,000 pruned sagas visited %.0f operation rows", visited)
	require.Less(t, visited, 100.0, "the pruned sagas' rows are not walked:\n%s", plan)
}

// visitedOf sums, over the scans of relation alias (which the planner numbers alias_1, … in
// a union), the rows they produced or filtered out.
func (n planNode) visitedOf(alias string) float64 {
	v := 0.0
	if n.Alias == alias || strings.HasPrefix(n.Alias, alias+"_") {
		v = (n.ActualRows + n.RemovedByFilter + n.RemovedByCheck) * n.ActualLoops
	}
	for _, c := range n.Plans {
		v += c.visitedOf(alias)
	}
	return v
}
