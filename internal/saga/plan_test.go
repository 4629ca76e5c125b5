package saga_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestListByStateReadsAPage runs List's statement under EXPLAIN ANALYZE on 200,000 sagas of
// which 30 need attention, with the wallet's kinds as the filter (as the operator console
// asks): a page of needs_attention, the first one and one after a cursor, reads that page
// on sagas_state_id_idx (no Seq Scan, and no walk of every saga by id), and a page of the
// common state reads about a page too. The plans are logged.
func TestListByStateReadsAPage(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO sagas (kind, state, created_at)
SELECT CASE WHEN i % 3 = 0 THEN 'deposit' WHEN i % 3 = 1 THEN 'purchase' ELSE 'transfer' END,
       CASE WHEN i % 6667 = 0 THEN 'needs_attention' WHEN i % 50 = 0 THEN 'compensated' ELSE 'completed' END,
       now() - (200000 - i) * interval '1 second'
FROM generate_series(1, 200000) AS g(i);
ANALYZE sagas`)
	require.NoError(t, err)
	var mid int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM sagas WHERE state = 'needs_attention' ORDER BY id DESC OFFSET 10 LIMIT 1`).Scan(&mid))
	kinds := []string{"deposit", "purchase", "transfer", "withdrawal"}
	for _, f := range []saga.ListFilter{
		{Kinds: kinds, State: saga.NeedsAttention, Limit: 21},
		{Kinds: kinds, State: saga.NeedsAttention, Before: mid, Limit: 21},
		{Kinds: kinds, State: saga.Compensated, Limit: 21},
		{Kinds: kinds, State: saga.Completed, Before: 100000, Limit: 21},
	} {
		query, args := saga.ListSQL(f)
		var raw []byte
		require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args).Scan(&raw))
		var plans []struct {
			Plan          planNode `json:"Plan"`
			ExecutionTime float64  `json:"Execution Time"`
		}
		require.NoError(t, json.Unmarshal(raw, &plans))
		var read float64
		used := false
		var nodes []string
		plans[0].Plan.walk(func(n planNode) {
			require.NotEqual(t, "Seq Scan", n.NodeType, "%+v scans every saga:\n%s", f, raw)
			if n.RelationName != "" {
				read += n.ActualRows * n.ActualLoops
			}
			if n.IndexName != "" {
				nodes = append(nodes, n.NodeType+" using "+n.IndexName)
			}
			// A rare state is read on its index; the common one may as well be read by id.
			used = used || n.IndexName == "sagas_state_id_idx" || (f.State == saga.Completed && n.IndexName == "sagas_pkey")
		})
		require.True(t, used, "%+v reads sagas_state_id_idx:\n%s", f, raw)
		require.LessOrEqual(t, read, 2*21.0, "%+v reads about one page:\n%s", f, raw)
		t.Logf("state %s before %d: %v, %g rows read, %.2f ms", f.State, f.Before, nodes, read, plans[0].ExecutionTime)
	}
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}
