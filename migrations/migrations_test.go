package migrations_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/migrations"
)

// TestWakeLogMigrationKeepsUsersWithNewsDue: a database the wake counter ran on (00008) is
// migrated to the wake log (00009) with a user whose next SMS waits in the inbox while its
// lane is idle (news the counter carried). The user must come out due, or nothing would
// take it again; and the migration goes down and up again.
func TestWakeLogMigrationKeepsUsersWithNewsDue(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Notify)
	ctx := context.Background()
	_, err := p.DownTo(ctx, 8)
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
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	tables := func() []string {
		var names []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(array_agg(relname ORDER BY relname), '{}') FROM pg_class
			WHERE relname IN ('sim_charges', 'sim_orders', 'sim_outages') AND relkind = 'r'`).Scan(&names))
		return names
	}
	require.Empty(t, tables())
	_, err := p.DownTo(ctx, 9)
	require.NoError(t, err)
	require.Equal(t, []string{"sim_charges", "sim_orders", "sim_outages"}, tables())
	_, err = pool.Exec(ctx, `INSERT INTO sim_outages (target, mode, until) VALUES ('gateway', 'fail', now())`)
	require.NoError(t, err, "as 00007 made it")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, tables())
}

// TestOutboxQueuesMigrationBackfillsAndReverses: the events already in the outbox when the
// per-queue relay's migration (00012) runs get the Java key hash of their user id and a
// transaction id; new events get both from the table; and it goes down and up again.
func TestOutboxQueuesMigrationBackfillsAndReverses(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	_, err := p.DownTo(ctx, 9)
	require.NoError(t, err)

	const insertEvent = `INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
		VALUES ($1, $2, 'deposit', 1, 'CNY', $2, 1, '+8613800138000', 'en')`
	var user int64
	require.NoError(t, pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (name, phone) VALUES ('Old Events', '+8613800138000') RETURNING id)
		INSERT INTO wallets (user_id) SELECT id FROM u RETURNING user_id`).Scan(&user))
	for seq := 1; seq <= 3; seq++ {
		_, err := pool.Exec(ctx, insertEvent, user, seq)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE wallet_events SET published_at = now() WHERE seq = 1`)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 12)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, insertEvent, user, 4)
	require.NoError(t, err)
	want := ordering.JavaStringHash(strconv.FormatInt(user, 10))
	var hashed, withXact int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE key_hash = $2), count(*) FILTER (WHERE xact IS NOT NULL)
		FROM wallet_events WHERE user_id = $1`, user, want).Scan(&hashed, &withXact))
	require.Equal(t, 4, hashed, "old and new events carry the user id's Java hash")
	require.Equal(t, 4, withXact)

	_, err = p.DownTo(ctx, 9)
	require.NoError(t, err)
	var columns int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'wallet_events' AND column_name IN ('key_hash', 'xact')`).Scan(&columns))
	require.Zero(t, columns)
	_, err = pool.Exec(ctx, insertEvent, user, 5)
	require.NoError(t, err, "the table takes events as before")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM wallet_events WHERE user_id = $1 AND key_hash = $2`, user, want).Scan(&hashed))
	require.Equal(t, 5, hashed)
}

// requireNewest checks that the database is at the newest migration.
func requireNewest(t *testing.T, p *goose.Provider) {
	t.Helper()
	sources := p.ListSources()
	v, err := p.GetDBVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, sources[len(sources)-1].Version, v)
}

// TestFenceMigrationFencesEveryUserAndCreatesOneDeployment: a database from before the fences
// (10) keeps its users and their leases through 00011; each starts at fence 0, and the
// notifier's tables get exactly one deployment with a random id, which a second row cannot
// join. Down removes both and keeps the users; up again creates a new deployment id.
func TestFenceMigrationFencesEveryUserAndCreatesOneDeployment(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Notify)
	ctx := context.Background()
	_, err := p.DownTo(ctx, 10)
	require.NoError(t, err)
	var exists bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('notify.deployment') IS NOT NULL
		OR EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'notify' AND table_name = 'progress' AND column_name = 'fence')`).Scan(&exists))
	require.False(t, exists, "down left the deployment table or the fence column")

	_, err = pool.Exec(ctx, `INSERT INTO notify.progress (user_id, last_seq, lane_owner, lane_until, due_at)
		VALUES (1, 3, 'host/notifier-0', now() + interval '30 seconds', now()), (2, 0, NULL, NULL, NULL)`)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	var fences, leased int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE fence = 0), count(*) FILTER (WHERE lane_owner IS NOT NULL AND last_seq = 3)
		FROM notify.progress`).Scan(&fences, &leased))
	require.Equal(t, 2, fences)
	require.Equal(t, 1, leased, "the lease and progress are kept")
	var first string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM notify.deployment`).Scan(&first), "exactly one deployment")
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, first, "a random (version 4) UUID")
	_, err = pool.Exec(ctx, `INSERT INTO notify.deployment DEFAULT VALUES`)
	require.Error(t, err, "a second deployment row")

	_, err = p.DownTo(ctx, 10)
	require.NoError(t, err)
	var users int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.progress`).Scan(&users))
	require.Equal(t, 2, users)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	var second string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM notify.deployment`).Scan(&second))
	require.NotEqual(t, first, second)
	requireNewest(t, p)
}

// TestEachServiceMigratesOnlyItsOwnSchema: on an empty database each sequence creates only its
// own tables, in either order, so the notifier's may live in a database of its own; and the
// two version tables are separate.
func TestEachServiceMigratesOnlyItsOwnSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tables := func(pool *pgxpool.Pool) (public, notify int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE schemaname = 'public'), count(*) FILTER (WHERE schemaname = 'notify')
			FROM pg_tables WHERE tablename <> 'goose_db_version'`).Scan(&public, &notify))
		return public, notify
	}
	notifyDB, _ := testdb.NewEmpty(t)
	v, err := migrations.Notify.Migrate(ctx, notifyDB, nil)
	require.NoError(t, err)
	require.Equal(t, newest(t, migrations.Notify), v)
	public, notify := tables(notifyDB)
	require.Zero(t, public, "the notifier creates no wallet table")
	require.Positive(t, notify)

	walletDB, _ := testdb.NewEmpty(t)
	v, err = migrations.Wallet.Migrate(ctx, walletDB, nil)
	require.NoError(t, err)
	require.Equal(t, newest(t, migrations.Wallet), v)
	public, notify = tables(walletDB)
	require.Positive(t, public)
	require.Zero(t, notify, "walletsvc creates no notifier table")

	// Both in one database, the notifier first this time; then again, which changes nothing.
	both, _ := testdb.NewEmpty(t)
	for range 2 {
		for _, seq := range []migrations.Sequence{migrations.Notify, migrations.Wallet} {
			_, err := seq.Migrate(ctx, both, nil)
			require.NoError(t, err, seq.Name)
		}
	}
	var walletVersions, notifyVersions []int64
	require.NoError(t, both.QueryRow(ctx, `SELECT array_agg(version_id ORDER BY version_id) FROM public.goose_db_version WHERE version_id > 0`).Scan(&walletVersions))
	require.NoError(t, both.QueryRow(ctx, `SELECT array_agg(version_id ORDER BY version_id) FROM notify.goose_db_version WHERE version_id > 0`).Scan(&notifyVersions))
	require.Equal(t, versions(t, migrations.Wallet), walletVersions)
	require.Equal(t, versions(t, migrations.Notify), notifyVersions)
}

// TestADatabaseOfTheCombinedSequenceIsAdopted: a database migrated when both services shared
// one sequence (one version table, public.goose_db_version, recording every version) is
// taken over by the two sequences without re-running anything: the notifier's versions are
// adopted into notify.goose_db_version, once, even with several replicas starting at once.
func TestADatabaseOfTheCombinedSequenceIsAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.New(t)
	// The combined sequence ended at the notifier's 00011: what came after is not applied yet.
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool
	p, err := migrations.Notify.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 11)
	require.NoError(t, err)
	// What the combined sequence left: every version in public.goose_db_version, no notifier
	// version table.
	_, err = pool.Exec(ctx, `
		INSERT INTO public.goose_db_version (version_id, is_applied) SELECT version_id, true FROM notify.goose_db_version WHERE version_id > 0;
		DROP TABLE notify.goose_db_version`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO notify.progress (user_id, last_seq) VALUES (7, 3)`)
	require.NoError(t, err)

	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := migrations.Notify.Migrate(ctx, pool, nil)
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs, "nothing is re-run (a re-run CREATE TABLE would fail)")
	}
	var adopted []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(version_id ORDER BY version_id) FROM notify.goose_db_version WHERE version_id > 0`).Scan(&adopted))
	require.Equal(t, versions(t, migrations.Notify), adopted, "each version once")
	var last int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = 7`).Scan(&last))
	require.EqualValues(t, 3, last, "the notifier's data is untouched")
	_, err = migrations.Wallet.Migrate(ctx, pool, nil)
	require.NoError(t, err, "the wallet's sequence ignores the notifier's versions in its table")
}

// migrated returns a new database, migrated to the newest version of both sequences, and a
// goose provider of seq on it.
func migrated(t *testing.T, seq migrations.Sequence) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	pool, _ := testdb.New(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() }) // a view of pool
	p, err := seq.Provider(db)
	require.NoError(t, err)
	return pool, p
}

func versions(t *testing.T, seq migrations.Sequence) []int64 {
	t.Helper()
	db := stdlib.OpenDB(pgx.ConnConfig{})
	defer db.Close() //nolint:errcheck // never connected
	p, err := seq.Provider(db)
	require.NoError(t, err)
	var out []int64
	for _, src := range p.ListSources() {
		out = append(out, src.Version)
	}
	return out
}

func newest(t *testing.T, seq migrations.Sequence) int64 {
	t.Helper()
	vs := versions(t, seq)
	return vs[len(vs)-1]
}

// TestWithdrawalsMigrationReverses: 00013 lets the outbox and the operations take the
// withdrawal kinds and a destination, and its Down takes them back while no withdrawal
// exists; with one recorded, Down refuses (it would drop the bank account and leave rows the
// old CHECKs refuse) and changes nothing.
func TestWithdrawalsMigrationReverses(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	var user int64
	require.NoError(t, pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (name, phone) VALUES ('Withdrawer', '+8613800138000') RETURNING id)
		INSERT INTO wallets (user_id) SELECT id FROM u RETURNING user_id`).Scan(&user))
	withdraw := func(sagaID int64) error {
		_, err := pool.Exec(ctx, `
			WITH s AS (INSERT INTO sagas (id, kind, state) VALUES ($2, 'withdrawal', 'completed') RETURNING id),
			o AS (INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency, destination)
				SELECT id, 'withdrawal', $1, 100, 'CNY', 'bank' FROM s)
			INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
			SELECT $1, $2, 'withdrawal_refund', 100, 'CNY', 100, id, '+8613800138000', 'en' FROM s`, user, sagaID)
		return err
	}

	_, err := p.DownTo(ctx, 12)
	require.NoError(t, err, "no withdrawal yet")
	_, err = pool.Exec(ctx, `INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
		VALUES ($1, 1, 'withdrawal', -100, 'CNY', 0, 1, '+8613800138000', 'en')`, user)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "before 00013 the outbox refuses the withdrawal kinds")
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code)
	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.NoError(t, withdraw(2))

	_, err = p.DownTo(ctx, 12)
	require.ErrorContains(t, err, "withdrawals exist")
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 13, v, "the later migrations went down; 00013 refused and is still applied")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
	var destination string
	require.NoError(t, pool.QueryRow(ctx, `SELECT destination FROM wallet_operations WHERE saga_id = 2`).Scan(&destination))
	require.Equal(t, "bank", destination, "the refused Down changed nothing")
}

// TestTheRulesOfTheOperationsTablesAreOnTheirColumnsDomains: 00027 moves the CHECKs of the
// tables every operation writes to domains, one per column. None of those tables keeps a
// CHECK (Postgres rebuilds a table's CHECKs for every statement that writes it: the cost the
// migration removes), every rule refuses, under its own name, a value it refused before,
// and the migration goes down (the CHECKs back, under the same names) and up again.
func TestTheRulesOfTheOperationsTablesAreOnTheirColumnsDomains(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	var user int64
	require.NoError(t, pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (name, phone) VALUES ('Ruled', '+8613800138000') RETURNING id),
		w AS (INSERT INTO wallets (user_id, balance, event_seq) SELECT id, 100, 1 FROM u RETURNING user_id),
		s AS (INSERT INTO sagas (id, kind, state) VALUES (1, 'deposit', 'completed') RETURNING id),
		o AS (INSERT INTO wallet_operations (saga_id, kind, user_id, amount, currency) SELECT 1, 'deposit', user_id, 100, 'CNY' FROM w),
		k AS (INSERT INTO idempotency_keys (user_id, key, request_hash, saga_id) SELECT user_id, 'k-1', '\x00', 1 FROM w),
		l AS (INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after) SELECT user_id, 1, 'credit', 100, 100 FROM w)
		INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
		SELECT user_id, 1, 'deposit', 100, 'CNY', 100, 1, '+8613800138000', 'en' FROM w RETURNING user_id`).Scan(&user))

	// Each rule, and a write of a value it refuses.
	rules := []struct{ name, write string }{
		{"sagas_state_check", `UPDATE sagas SET state = 'lost'`},
		{"sagas_phase_check", `UPDATE sagas SET phase = 'sideways'`},
		{"sagas_step_check", `UPDATE sagas SET step = -1`},
		{"sagas_attempts_check", `UPDATE sagas SET attempts = -1`},
		{"sagas_fence_held", `UPDATE sagas SET fence = CASE WHEN fence = 7 THEN fence ELSE -1 END`},
		{"wallets_currency_check", `UPDATE wallets SET currency = 'cny'`},
		{"wallets_balance_check", `UPDATE wallets SET balance = balance - 101`},
		{"wallets_event_seq_check", `UPDATE wallets SET event_seq = -1`},
		{"ledger_entries_amount_check", `UPDATE ledger_entries SET amount = 0`},
		{"ledger_entries_balance_after_check", `UPDATE ledger_entries SET balance_after = -1`},
		{"wallet_events_seq_check", `UPDATE wallet_events SET seq = 0`},
		{"wallet_events_kind_check", `UPDATE wallet_events SET kind = 'gift'`},
		{"wallet_events_amount_check", `UPDATE wallet_events SET amount = 0`},
		{"wallet_events_balance_after_check", `UPDATE wallet_events SET balance_after = -1`},
		{"wallet_operations_kind_check", `UPDATE wallet_operations SET kind = 'gift'`},
		{"wallet_operations_amount_check", `UPDATE wallet_operations SET amount = 0`},
		{"idempotency_keys_key_check", `UPDATE idempotency_keys SET key = ''`},
	}
	refused := func(t *testing.T, name, write string) {
		t.Helper()
		_, err := pool.Exec(ctx, write)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "%s was taken", write)
		require.Equal(t, pgerrcode.CheckViolation, pgErr.Code, "%s: %v", write, err)
		require.Equal(t, name, pgErr.ConstraintName, "%s: %v", write, err)
	}
	tables := []string{"sagas", "wallets", "ledger_entries", "wallet_events", "wallet_operations", "idempotency_keys"}
	tableChecks := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
			WHERE contype = 'c' AND conrelid = ANY(SELECT unnest($1::text[])::regclass)`, tables).Scan(&n))
		return n
	}

	require.Zero(t, tableChecks(), "a table every operation writes still has a CHECK")
	for _, r := range rules {
		refused(t, r.name, r.write)
	}

	_, err := p.DownTo(ctx, 26)
	require.NoError(t, err)
	require.Equal(t, len(rules), tableChecks(), "the Down puts every CHECK back on its table")
	for _, r := range rules {
		refused(t, r.name, r.write)
	}
	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
	require.Zero(t, tableChecks())
	var balance int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT balance FROM wallets WHERE user_id = $1`, user).Scan(&balance))
	require.EqualValues(t, 100, balance, "the rows went down and up unchanged")
}
