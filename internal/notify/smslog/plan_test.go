package smslog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

// walk calls f on n and every node below it.
func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// TestConsoleQueriesUseIndexes runs each read statement behind the console's lists under
// EXPLAIN ANALYZE on a table of 10,000 users and 200,000 SMS: none may scan a whole table
// (no Seq Scan), and each reads (rows out of its scans, over all loops) at most a bound
// set by its page, not by the table. The plans are logged.
func TestConsoleQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	const users, perUser = 10_000, 20
	start := time.Now()
	notifytest.Bulk(t, pool, users, perUser)
	_, err := pool.Exec(ctx, `
INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at)
SELECT 'MSG' || i, 'q', i, '\x00'::bytea, 'undecodable', now() - i * interval '1 second' FROM generate_series(1, 20000) AS g(i);
INSERT INTO notify.audit (actor, action, user_id, seq, reason)
SELECT 'alice', 'replay_dead_letter', i % 10000 + 1, 1, 'test' FROM generate_series(1, 20000) AS g(i);
ANALYZE notify.bad_messages; ANALYZE notify.audit`)
	require.NoError(t, err)
	t.Logf("seeded %d users, %d SMS, 20000 bad messages, 20000 audit rows in %s", users, users*perUser, time.Since(start).Round(time.Millisecond))

	// A mid-table cursor position: the updated_at of the 100,000th change.
	var midAt time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT updated_at FROM notify.notifications WHERE user_id = 5000 AND seq = 10`).Scan(&midAt))
	inf := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	page := 51 // a page of 50 and the one that tells whether there is another
	cases := []struct {
		query string
		args  pg.Args
		index string  // an index the plan must use
		most  float64 // rows its scans may read
	}{
		{"activity", pg.Args{"before_at": inf, "before_user": 0, "before_seq": 0, "limit": page}, "notifications_changes", 51},
		{"activity", pg.Args{"before_at": midAt, "before_user": 5000, "before_seq": 10, "limit": page}, "notifications_changes", 51},
		{"user_ids", pg.Args{"after_user": 0, "limit": page}, "notifications_pkey", 51 * perUser},
		{"user_ids", pg.Args{"after_user": 7000, "limit": page}, "notifications_pkey", 51 * perUser},
		{"user_ids_by_phone", pg.Args{"phone": notifytest.BulkPhone(4242), "after_user": 0, "limit": page}, "notifications_phone", perUser},
		{"users", pg.Args{"ids": seq(7001, 7050)}, "notifications_pkey", 50*perUser + 50*perUser},
		{"user_sms", pg.Args{"user": 4242, "after_seq": 5, "limit": page, "replay": deadletters.ActionReplay}, "notifications_pkey", 3 * perUser},
		{"dead_letters", pg.Args{"before_at": inf, "before_user": 0, "before_seq": 0, "limit": page, "replay": deadletters.ActionReplay}, "notifications_dead", 51 * 3},
		{"bad_messages", pg.Args{"before_at": inf, "before_msg_id": "", "limit": page, "excerpt": smslog.BadBodyExcerpt}, "bad_messages_received", 51},
		{"audit", pg.Args{"before_id": int64(math.MaxInt64), "limit": page}, "audit_pkey", 51},
		{"changes", pg.Args{"after_at": midAt, "after_user": 5000, "after_seq": 10, "limit": 50, "lag_us": int64(10_000_000)}, "notifications_changes", 50},
	}
	for _, c := range cases {
		var raw []byte
		require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+smslog.Queries[c.query], c.args).Scan(&raw), c.query)
		var plans []struct {
			Plan          planNode `json:"Plan"`
			ExecutionTime float64  `json:"Execution Time"`
		}
		require.NoError(t, json.Unmarshal(raw, &plans))
		require.Len(t, plans, 1)
		var read float64
		var nodes []string
		used := false
		plans[0].Plan.walk(func(n planNode) {
			require.NotEqual(t, "Seq Scan", n.NodeType, "%s scans the whole of %s:\n%s", c.query, n.RelationName, raw)
			if n.RelationName != "" {
				read += n.ActualRows * n.ActualLoops
			}
			if n.RelationName != "" || n.IndexName != "" {
				nodes = append(nodes, fmt.Sprintf("%s %s %s (%g rows)", n.NodeType, n.RelationName, n.IndexName, n.ActualRows*n.ActualLoops))
			}
			used = used || n.IndexName == c.index
		})
		require.True(t, used, "%s uses %s:\n%s", c.query, c.index, raw)
		require.LessOrEqual(t, read, c.most, "%s reads at most %g rows:\n%s", c.query, c.most, raw)
		t.Logf("%s: %s; %.2f ms", c.query, strings.Join(nodes, ", "), plans[0].ExecutionTime)
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
