package wallet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestAStuckQueueIsNotRescannedByTheOthers measures, with EXPLAIN ANALYZE of Pending's
// statement, how many outbox rows a queue's read visits while another queue of eight is
// stuck with thousands of unpublished rows: its first read (cursor at 0) passes them once;
// every read after that, from its cursor, visits only the rows written since.
func TestAStuckQueueIsNotRescannedByTheOthers(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const queues, stuckQueue, otherQueue, stuckRows = 8, 5, 2, 6000
	_, err := pool.Exec(ctx, `
INSERT INTO users (name, phone) SELECT 'user ' || g, '+8613800138000' FROM generate_series(1, 800) g;
INSERT INTO wallets (user_id) SELECT id FROM users`)
	require.NoError(t, err)
	// seq continues per user from what the user has; saga 1 need not exist (no foreign key).
	write := func(queue, perUser, users int) {
		t.Helper()
		_, err := pool.Exec(ctx, `
WITH u AS (
    SELECT id, phone, locale FROM users WHERE abs(wallet_key_hash(id) % $1) = $2 ORDER BY id LIMIT $4
), n AS (
    SELECT u.*, COALESCE((SELECT max(seq) FROM wallet_events e WHERE e.user_id = u.id), 0) AS seq0 FROM u
)
INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
SELECT n.id, n.seq0 + s, 'deposit', 1, 'CNY', n.seq0 + s, 1, n.phone, n.locale
FROM generate_series(1, $3) s, n ORDER BY s, n.id`, queues, queue, perUser, users)
		require.NoError(t, err)
	}
	write(stuckQueue, stuckRows/60, 60) // the stuck queue's backlog, oldest first…
	write(otherQueue, 1, 20)            // …then the other queue's rows
	other := QueueSlice{Count: queues, Index: otherQueue}
	// Rows of transactions younger than the oldest one running anywhere on the cluster are
	// read again by design: wait until every transaction older than these rows has ended
	// (other tests share the cluster), so the measure is of the cursor alone.
	wait.Until(t, 30*time.Second, "every older transaction of the cluster to end", func() bool {
		var settled bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) > (SELECT max(xact) FROM wallet_events)`).Scan(&settled))
		return settled
	})

	cold, coldPage := explainPending(ctx, t, pool, other, 0, 0)
	require.Len(t, coldPage.Events, 20)
	require.GreaterOrEqual(t, cold.visited, stuckRows, "a read from 0 passes the stuck queue's rows once")

	write(stuckQueue, 1, 10) // both queues go on writing
	write(otherQueue, 1, 10)
	warm, warmPage := explainPending(ctx, t, pool, other, coldPage.Last, coldPage.Horizon)
	require.Len(t, warmPage.Events, 10, "only the new rows")
	require.Less(t, warm.visited, 100, "a read from the cursor does not visit the stuck queue's backlog")

	again, _ := explainPending(ctx, t, pool, QueueSlice{Count: queues, Index: otherQueue}, warmPage.Last, warmPage.Horizon)
	t.Logf("queue %d of %d beside queue %d stuck with %d unpublished rows: first read visited %d rows in %.2f ms; "+
		"from its cursor, with 20 new rows, %d rows in %.2f ms; with none, %d rows in %.2f ms",
		otherQueue, queues, stuckQueue, stuckRows, cold.visited, cold.ms, warm.visited, warm.ms, again.visited, again.ms)
	require.Less(t, again.visited, 100)
}

type readCost struct {
	visited int
	ms      float64
}

// explainPending runs Pending's statement under EXPLAIN ANALYZE, returning how many
// wallet_events rows its scans of the queue's rows visited (returned or filtered out), and
// then runs Pending itself.
func explainPending(ctx context.Context, t *testing.T, pool *pgxpool.Pool, q QueueSlice, after int64, horizon uint64) (readCost, OutboxPage) {
	t.Helper()
	var plan string
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+pendingSQL,
		pendingArgs(q, after, horizon, []int64{}, 256)).Scan(&plan))
	var out []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &out))
	require.Len(t, out, 1)
	page, err := NewOutboxStore(pool, 1, 0).Pending(ctx, q, after, horizon, nil, 256)
	require.NoError(t, err)
	return readCost{visited: int(out[0].Plan.visited()), ms: out[0].ExecutionTime}, page
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the cost reads.
type planNode struct {
	NodeType        string     `json:"Node Type"`
	Alias           string     `json:"Alias"`
	ActualRows      float64    `json:"Actual Rows"`
	ActualLoops     float64    `json:"Actual Loops"`
	RemovedByFilter float64    `json:"Rows Removed by Filter"`
	RemovedByCheck  float64    `json:"Rows Removed by Index Recheck"`
	Plans           []planNode `json:"Plans"`
}

// visited sums, over the scans of the queue's rows (alias e, which the planner numbers e_1,
// e_2, … in the union), the rows they produced or filtered out (EXPLAIN reports both per
// loop).
func (n planNode) visited() float64 {
	v := 0.0
	if n.Alias == "e" || strings.HasPrefix(n.Alias, "e_") {
		v = (n.ActualRows + n.RemovedByFilter + n.RemovedByCheck) * n.ActualLoops
	}
	for _, c := range n.Plans {
		v += c.visited()
	}
	return v
}
