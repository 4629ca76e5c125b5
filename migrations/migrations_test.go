package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/migrations"
)

// TestWakeLogMigrationKeepsUsersWithNewsDue: a database the wake counter ran on (00008) is
// migrated to the wake log (00009) with a user whose next SMS waits in the inbox while its
// lane is idle (news the counter carried). The user must come out due, or nothing would
// take it again; and the migration goes down and up again.
func TestWakeLogMigrationKeepsUsersWithNewsDue(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS())
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 8)
	require.NoError(t, err)

	_, err = pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, wake) VALUES (1, 1, 3), (2, 1, 1);
		INSERT INTO notify.notifications (user_id, seq, status) VALUES
			(1, 1, 'sent'), (1, 2, 'pending'),  -- user 1: news, idle
			(2, 1, 'sent')                      -- user 2: nothing waiting`)
	require.NoError(t, err)

	_, err = p.Up(ctx)
	require.NoError(t, err)
	var due1, due2 bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT due_at IS NOT NULL FROM notify.progress WHERE user_id = 1),
		(SELECT due_at IS NOT NULL FROM notify.progress WHERE user_id = 2)`).Scan(&due1, &due2))
	require.True(t, due1, "user 1's waiting SMS would never be claimed")
	require.False(t, due2, "user 2 has nothing to send")

	_, err = p.DownTo(ctx, 8)
	require.NoError(t, err)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	sources := p.ListSources()
	require.Equal(t, sources[len(sources)-1].Version, v, "back at the latest migration")
}

// The simulators left the product's database for a provider process of their own: 00010
// drops their tables, and its Down brings them back as they were.
func TestSimulatorTablesAreDropped(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS())
	require.NoError(t, err)
	tables := func() []string {
		var names []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(array_agg(relname ORDER BY relname), '{}') FROM pg_class
			WHERE relname IN ('sim_charges', 'sim_orders', 'sim_outages') AND relkind = 'r'`).Scan(&names))
		return names
	}
	require.Empty(t, tables())
	_, err = p.DownTo(ctx, 9)
	require.NoError(t, err)
	require.Equal(t, []string{"sim_charges", "sim_orders", "sim_outages"}, tables())
	_, err = pool.Exec(ctx, `INSERT INTO sim_outages (target, mode, until) VALUES ('gateway', 'fail', now())`)
	require.NoError(t, err, "as 00007 made it")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, tables())
}
