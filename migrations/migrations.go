// Package migrations embeds the goose SQL migrations of both services and applies them.
//
// Files are numbered in one strict sequence (goose refuses out-of-order versions): the
// wallet and saga tables live in public, the notifier's in the notify schema. Migrate takes goose's Postgres advisory-lock session locker, so
// several replicas starting at once apply each migration exactly once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// Migrate applies every pending migration to the database behind pool and returns the
// resulting version. It holds a Postgres advisory lock while it works.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int64, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool: closing it closes no connection of the pool's
	return migrateDB(ctx, db, log)
}

func migrateDB(ctx context.Context, db *sql.DB, log *slog.Logger) (int64, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrations: locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: up: %w", err)
	}
	for _, r := range results {
		if log != nil {
			log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
		}
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}
