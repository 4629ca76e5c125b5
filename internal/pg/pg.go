// Package pg opens the PostgreSQL pool both binaries use and holds small helpers shared by the
// stores: transactions as closures and SQLSTATE checks.
package pg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open returns a pool on databaseURL with at least minConns connections allowed, after
// checking the database answers.
func Open(ctx context.Context, databaseURL string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if pc.MaxConns < maxConns {
		pc.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", redact(databaseURL), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s unreachable: %w", redact(databaseURL), err)
	}
	return pool, nil
}

// Beginner is a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction and commits it; on error or panic it rolls back with a
// fresh context, so a cancelled ctx never leaves the transaction open.
func WithTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// IsCode reports whether err is a Postgres error with the given SQLSTATE.
func IsCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// SQLSTATE codes the stores translate.
const (
	UniqueViolation     = "23505"
	CheckViolation      = "23514"
	ForeignKeyViolation = "23503"
	SerializationFail   = "40001"
	DeadlockDetected    = "40P01"
)

func redact(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}
