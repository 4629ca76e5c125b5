// Package migrations holds each service's database migrations and applies them: the
// wallet's (schema public: users, wallets, ledger, sagas, outbox, idempotency keys, audit) and
// the notifier's (schema notify: inbox, progress, wakes, SMS log, audit). Each is a goose
// sequence of its own with its own version table, so each binary migrates only its own
// schema, and the notifier's may live in a database of its own.
//
// Both sequences keep the version numbers they had when they were one (the wallet's 2, 3, 5,
// 7, 10, 12, …; the notifier's 1, 4, 5, 6, 8, 9, 11, …), so a database migrated by the old
// combined sequence needs nothing re-run: Migrate adopts the notifier's versions that the
// combined version table records (see adoptLegacy). New migrations continue each sequence.
//
// Migrate takes goose's Postgres advisory-lock session locker (one lock per sequence), so
// several replicas starting at once apply each migration exactly once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/walletsaga/walletsaga/internal/pg"
)

//go:embed wallet/*.sql notify/*.sql
var files embed.FS

// The statements of adoptLegacy, one a file in sql/.
var (
	//go:embed sql/try_adopt_lock.sql
	tryAdoptLockSQL string
	//go:embed sql/version_tables.sql
	versionTablesSQL string
	//go:embed sql/combined_applied.sql
	combinedAppliedSQL string
)

// Sequence is one service's migrations.
type Sequence struct {
	// Name is the service's ("wallet", "notify").
	Name string
	dir  string
	// schema, when set, is created before goose runs: the version table lives in it.
	schema string
	table  string
	lockID int64
}

// The two sequences.
var (
	// Wallet is walletsvc's: schema public, version table public.goose_db_version (where the
	// combined sequence kept its versions too).
	Wallet = Sequence{Name: "wallet", dir: "wallet", table: "goose_db_version", lockID: 7421_0001}
	// Notify is the notifier's: schema notify, version table notify.goose_db_version.
	Notify = Sequence{Name: "notify", dir: "notify", schema: "notify", table: "notify.goose_db_version", lockID: 7421_0002}
)

// FS returns the sequence's migration files.
func (s Sequence) FS() fs.FS {
	sub, err := fs.Sub(files, s.dir)
	if err != nil {
		panic(err) // the directory is embedded: it exists
	}
	return sub
}

// Provider returns a goose provider of the sequence on db (for Migrate, and for tests that
// step through versions). It does not take the advisory lock.
func (s Sequence) Provider(db *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	opts = append([]goose.ProviderOption{goose.WithTableName(s.table)}, opts...)
	p, err := goose.NewProvider(goose.DialectPostgres, db, s.FS(), opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations %s: %w", s.Name, err)
	}
	return p, nil
}

// Migrate applies every pending migration of the sequence to the database behind pool and
// returns the resulting version. It holds the sequence's advisory lock while it works.
func (s Sequence) Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int64, error) {
	if s.schema != "" {
		// Built here, not a file in sql/: the schema is the sequence's, and an identifier
		// cannot be a parameter.
		if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return 0, fmt.Errorf("migrations %s: schema: %w", s.Name, err)
		}
	}
	if s.Name == Notify.Name {
		if err := s.adoptLegacy(ctx, pool, log); err != nil {
			return 0, err
		}
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool: closing it closes no connection of the pool's
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(s.lockID))
	if err != nil {
		return 0, fmt.Errorf("migrations %s: locker: %w", s.Name, err)
	}
	p, err := s.Provider(db, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations %s: up: %w", s.Name, err)
	}
	for _, r := range results {
		if log != nil {
			log.Info("migration applied", "sequence", s.Name, "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
		}
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations %s: version: %w", s.Name, err)
	}
	return v, nil
}

// legacyNotifyVersions are the notifier's migrations the combined sequence applied, recorded
// in public.goose_db_version; version 4 created the notifier's tables, so its presence there
// marks a database migrated by the combined sequence.
var legacyNotifyVersions = []int64{1, 4, 5, 6, 8, 9, 11}

// adoptLegacy gives a database migrated by the combined sequence its notifier version table:
// when notify.goose_db_version does not exist yet and public.goose_db_version records the
// notifier's tables (version 4), it creates the table (goose's own store and DDL) and records
// as applied the notifier's versions the combined table records, so goose re-runs none of
// them. It runs in one transaction under the sequence's advisory lock, so replicas starting at
// once adopt once.
//
// The lock is tried, never waited for inside the server: the replica that holds it (goose's
// session lock, the same id) may be building an index CONCURRENTLY, which waits for every
// open transaction to end, and a transaction of ours waiting for its lock would be one: a
// deadlock. A try that fails ends its transaction and tries again a moment later.
func (s Sequence) adoptLegacy(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool: closing it closes no connection of the pool's
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		held, err := s.adoptUnderLock(ctx, db, log)
		if err != nil || held {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("migrations %s: adopt: waiting for the migration lock: %w", s.Name, ctx.Err())
		case <-t.C:
		}
	}
}

// adoptUnderLock is one try of adoptLegacy: held is false when another session holds the
// sequence's lock (nothing was done).
func (s Sequence) adoptUnderLock(ctx context.Context, db *sql.DB, log *slog.Logger) (held bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
	}
	defer func() {
		if err != nil || !held {
			_ = tx.Rollback()
		}
	}()
	if err := tx.QueryRowContext(ctx, tryAdoptLockSQL, pg.Args{"lock_id": s.lockID}).Scan(&held); err != nil || !held {
		if err != nil {
			err = fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
		}
		return false, err
	}
	return true, s.adopt(ctx, tx, log)
}

// adopt does adoptLegacy's work in tx, which holds the sequence's lock, and commits it.
func (s Sequence) adopt(ctx context.Context, tx *sql.Tx, log *slog.Logger) (err error) {
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var ours, combined bool
	if err := tx.QueryRowContext(ctx, versionTablesSQL, pg.Args{"table": s.table}).Scan(&ours, &combined); err != nil {
		return fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
	}
	var applied []int64
	if !ours && combined {
		if applied, err = appliedOf(ctx, tx, legacyNotifyVersions); err != nil {
			return fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
		}
	}
	if !slices.Contains(applied, 4) {
		return tx.Commit() // nothing to adopt: a database of our own, or one adopted already
	}
	store, err := database.NewStore(database.DialectPostgres, s.table)
	if err != nil {
		return err
	}
	if err := store.CreateVersionTable(ctx, tx); err != nil {
		return fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
	}
	for _, v := range append([]int64{0}, applied...) {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return fmt.Errorf("migrations %s: adopt version %d: %w", s.Name, v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations %s: adopt: %w", s.Name, err)
	}
	if log != nil {
		log.Info("adopted the notifier's migrations from the combined version table", "versions", applied)
	}
	return nil
}

// appliedOf returns which of versions the combined version table records as applied.
func appliedOf(ctx context.Context, tx *sql.Tx, versions []int64) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, combinedAppliedSQL, pg.Args{"versions": versions})
	if err != nil {
		return nil, err
	}
	defer rows.Close() //nolint:errcheck // rows.Err reports what matters
	var applied []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied = append(applied, v)
	}
	return applied, rows.Err()
}
