package migrations_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/migrations"
)

// TestEveryTableHasARetentionRule: every table the two sequences create (schema public: the
// wallet's and the saga engine's; schema notify: the notifier's) has its row in the table of
// tables of docs/ARCHITECTURE.md's Retention section, and that table names no other: a
// setting that prunes it, or "never" with the reason. A new table fails here until it has one.
func TestEveryTableHasARetentionRule(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	rows, err := pool.Query(context.Background(), `
		SELECT CASE WHEN schemaname = 'public' THEN tablename ELSE schemaname || '.' || tablename END
		FROM pg_tables WHERE schemaname IN ('public', 'notify') ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "wallet_operations")
	require.Contains(t, tables, "notify.audit")

	rules := retentionRules(t)
	var documented []string
	for table, r := range rules {
		documented = append(documented, table)
		require.True(t, r.setting == "never" || strings.HasPrefix(r.setting, "`RETENTION_"),
			"%s: its setting is a RETENTION_ window or never, got %q", table, r.setting)
		require.NotEmpty(t, r.why, "%s: what is pruned, or why it never is", table)
	}
	slices.Sort(documented)
	require.Equal(t, tables, documented, "docs/ARCHITECTURE.md, Retention: one row per table the migrations create")
}

type retentionRule struct{ setting, why string }

// retentionRules reads the table of tables of docs/ARCHITECTURE.md's Retention section: its
// first column is a table's name, in backquotes, its second the setting that prunes it.
func retentionRules(t *testing.T) map[string]retentionRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "ARCHITECTURE.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Retention\n")
	require.True(t, ok, "docs/ARCHITECTURE.md has a Retention section")
	section, _, _ = strings.Cut(section, "\n## ")
	rules := map[string]retentionRule{}
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		require.Len(t, cells, 5, "a row of the table of tables: %q", line)
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		require.NotContains(t, rules, name, "%s has one row", name)
		rules[name] = retentionRule{setting: strings.TrimSpace(cells[1]), why: strings.TrimSpace(cells[4])}
	}
	require.NotEmpty(t, rules)
	return rules
}

// TestOperationsMigrationMarksTheRowsOfPrunedSagas: on a database where sagas were pruned
// before the wallet marked its rows (00018's retention), 00022 marks the operation rows whose
// saga is gone and only those, moves a user's list to indexes of the kept rows, and goes down
// and up again.
func TestOperationsMigrationMarksTheRowsOfPrunedSagas(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	_, err := p.DownTo(ctx, 18)
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
