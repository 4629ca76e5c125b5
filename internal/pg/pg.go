// Package pg opens the PostgreSQL pool both binaries use and holds what every store shares:
// the one transaction helper (WithTx) and the SQLSTATE checks the stores translate driver
// errors with.
package pg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
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

// rollbackTimeout bounds a rollback, which runs on a context of its own.
const rollbackTimeout = 5 * time.Second

// WithTx runs fn in a transaction on db and commits it if fn returns nil. If fn returns an
// error or panics, the transaction is rolled back, and the error is returned or the panic
// goes on. The rollback does not use ctx's cancellation (a cancelled request must still
// release its locks at once, not when the connection is next used), only its values, and is
// bounded by rollbackTimeout; a rollback that fails closes the connection, which ends the
// transaction on the server too. Either way the connection goes back to a pool clean.
func WithTx(ctx context.Context, db Beginner, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Deferred without a condition, so it runs while a panic unwinds too; after a commit it
	// is a no-op (pgx.ErrTxClosed, no round trip).
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Code returns the SQLSTATE of err if it is (or wraps) a Postgres error, else "". Compare it
// with github.com/jackc/pgerrcode's constants or classes (pgerrcode.IsDataException).
func Code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// IsCode reports whether err is a Postgres error with one of the given SQLSTATEs.
func IsCode(err error, codes ...string) bool {
	code := Code(err)
	return code != "" && slices.Contains(codes, code)
}

// IsViolation reports whether err is a Postgres error with SQLSTATE code on the named
// constraint ("" for any constraint).
func IsViolation(err error, code, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code && (constraint == "" || pe.ConstraintName == constraint)
}

func redact(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}
