package providersim

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Schema is the Postgres schema the simulator's tables and goose version table live in.
const Schema = "providersim"

// migrationLockID is the advisory lock goose holds while it migrates the simulator's schema:
// not goose's default, which the product's migrations take, so neither waits for the other.
const migrationLockID = 0x70726f7669646572 // "provider"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// PostgresStore is a Store in Postgres, in the schema Schema: its own tables, its own goose
// migrations and version table, apart from the product's.
type PostgresStore struct{ pool *pgxpool.Pool }

// NewPostgresStore returns a store on pool; Migrate must have run on its database.
func NewPostgresStore(pool *pgxpool.Pool) *PostgresStore { return &PostgresStore{pool: pool} }

// Migrate creates the schema if needed and applies the simulator's migrations (goose, its
// version table providersim.goose_db_version, under an advisory lock of its own). It returns
// the resulting version.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int64, error) {
	// goose creates its version table before the first migration runs, so the schema that
	// holds it has to exist first.
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema); err != nil {
		return 0, fmt.Errorf("providersim: schema: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool: closing it closes no connection of the pool's
	return migrateDB(ctx, db, log)
}

func migrateDB(ctx context.Context, db *sql.DB, log *slog.Logger) (int64, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID))
	if err != nil {
		return 0, fmt.Errorf("providersim: locker: %w", err)
	}
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return 0, fmt.Errorf("providersim: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithSessionLocker(locker), goose.WithTableName(Schema+".goose_db_version"))
	if err != nil {
		return 0, fmt.Errorf("providersim: migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("providersim: migrations: up: %w", err)
	}
	for _, r := range results {
		if log != nil {
			log.Info("providersim migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
		}
	}
	return p.GetDBVersion(ctx)
}

const chargeColumns = `key, charge_id, user_id, amount, currency, source, status, refund_key, attempts, created_at`

func scanCharge(row pgx.Row) (Charge, error) {
	var c Charge
	err := row.Scan(&c.Key, &c.ID, &c.UserID, &c.Amount, &c.Currency, &c.Source, &c.Status, &c.RefundKey, &c.Attempts, &c.CreatedAt)
	return c, err
}

// Charge implements Store.
func (s *PostgresStore) Charge(ctx context.Context, c Charge) (Charge, error) {
	got, err := scanCharge(s.pool.QueryRow(ctx, `
INSERT INTO providersim.charges (key, charge_id, user_id, amount, currency, source, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET attempts = charges.attempts + 1
RETURNING `+chargeColumns, c.Key, c.ID, c.UserID, c.Amount, c.Currency, c.Source, c.Status))
	if err != nil {
		return Charge{}, fmt.Errorf("providersim: charge: %w", err)
	}
	return got, nil
}

// Refund implements Store.
func (s *PostgresStore) Refund(ctx context.Context, chargeKey, refundKey, voidID string) (Charge, error) {
	got, err := scanCharge(s.pool.QueryRow(ctx, `
INSERT INTO providersim.charges (key, charge_id, user_id, amount, currency, source, status, refund_key, attempts)
VALUES ($1, $2, 0, 0, '', '', 'voided', $3, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN charges.status = 'charged' THEN 'refunded' ELSE charges.status END,
    refund_key = CASE WHEN charges.status = 'charged' THEN $3 ELSE charges.refund_key END
RETURNING `+chargeColumns, chargeKey, voidID, refundKey))
	if err != nil {
		return Charge{}, fmt.Errorf("providersim: refund: %w", err)
	}
	return got, nil
}

const orderColumns = `key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts, created_at`

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	err := row.Scan(&o.Key, &o.ID, &o.Merchant, &o.Reference, &o.Amount, &o.Currency, &o.Status, &o.CancelKey, &o.Attempts, &o.CreatedAt)
	return o, err
}

// PlaceOrder implements Store.
func (s *PostgresStore) PlaceOrder(ctx context.Context, o Order, pendingAttempts int) (Order, error) {
	got, err := scanOrder(s.pool.QueryRow(ctx, `
INSERT INTO providersim.orders (key, order_id, merchant, reference, amount, currency, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET
    attempts = orders.attempts + 1,
    status = CASE WHEN orders.status = 'pending' AND orders.attempts + 1 > $8 THEN 'placed' ELSE orders.status END
RETURNING `+orderColumns, o.Key, o.ID, o.Merchant, o.Reference, o.Amount, o.Currency, o.Status, pendingAttempts))
	if err != nil {
		return Order{}, fmt.Errorf("providersim: order: %w", err)
	}
	return got, nil
}

// CancelOrder implements Store.
func (s *PostgresStore) CancelOrder(ctx context.Context, orderKey, cancelKey, voidID string) (Order, error) {
	got, err := scanOrder(s.pool.QueryRow(ctx, `
INSERT INTO providersim.orders (key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts)
VALUES ($1, $2, '', '', 0, '', 'voided', $3, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN orders.status = 'pending' THEN 'cancelled' ELSE orders.status END,
    cancel_key = CASE WHEN orders.status = 'pending' THEN $3 ELSE orders.cancel_key END
RETURNING `+orderColumns, orderKey, voidID, cancelKey))
	if err != nil {
		return Order{}, fmt.Errorf("providersim: cancel: %w", err)
	}
	return got, nil
}

const payoutColumns = `key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts, created_at`

func scanPayout(row pgx.Row) (Payout, error) {
	var p Payout
	err := row.Scan(&p.Key, &p.ID, &p.UserID, &p.Amount, &p.Currency, &p.Destination, &p.Status, &p.CancelKey, &p.Attempts, &p.CreatedAt)
	return p, err
}

// Payout implements Store.
func (s *PostgresStore) Payout(ctx context.Context, p Payout, pendingAttempts int) (Payout, error) {
	got, err := scanPayout(s.pool.QueryRow(ctx, `
INSERT INTO providersim.payouts (key, payout_id, user_id, amount, currency, destination, status)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key) DO UPDATE SET
    attempts = payouts.attempts + 1,
    status = CASE WHEN payouts.status = 'pending' AND payouts.attempts + 1 > $8 THEN 'paid' ELSE payouts.status END
RETURNING `+payoutColumns, p.Key, p.ID, p.UserID, p.Amount, p.Currency, p.Destination, p.Status, pendingAttempts))
	if err != nil {
		return Payout{}, fmt.Errorf("providersim: payout: %w", err)
	}
	return got, nil
}

// CancelPayout implements Store.
func (s *PostgresStore) CancelPayout(ctx context.Context, payoutKey, cancelKey, voidID string) (Payout, error) {
	got, err := scanPayout(s.pool.QueryRow(ctx, `
INSERT INTO providersim.payouts (key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts)
VALUES ($1, $2, 0, 0, '', '', 'voided', $3, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN payouts.status = 'pending' THEN 'cancelled' ELSE payouts.status END,
    cancel_key = CASE WHEN payouts.status = 'pending' THEN $3 ELSE payouts.cancel_key END
RETURNING `+payoutColumns, payoutKey, voidID, cancelKey))
	if err != nil {
		return Payout{}, fmt.Errorf("providersim: cancel payout: %w", err)
	}
	return got, nil
}

// Charges implements Store.
func (s *PostgresStore) Charges(ctx context.Context) ([]Charge, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+chargeColumns+` FROM providersim.charges ORDER BY created_at, key`)
	if err != nil {
		return nil, fmt.Errorf("providersim: charges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Charge, error) { return scanCharge(r) })
	if err != nil {
		return nil, fmt.Errorf("providersim: charges: %w", err)
	}
	return out, nil
}

// Orders implements Store.
func (s *PostgresStore) Orders(ctx context.Context) ([]Order, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+orderColumns+` FROM providersim.orders ORDER BY created_at, key`)
	if err != nil {
		return nil, fmt.Errorf("providersim: orders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) { return scanOrder(r) })
	if err != nil {
		return nil, fmt.Errorf("providersim: orders: %w", err)
	}
	return out, nil
}

// Payouts implements Store.
func (s *PostgresStore) Payouts(ctx context.Context) ([]Payout, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+payoutColumns+` FROM providersim.payouts ORDER BY created_at, key`)
	if err != nil {
		return nil, fmt.Errorf("providersim: payouts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payout, error) { return scanPayout(r) })
	if err != nil {
		return nil, fmt.Errorf("providersim: payouts: %w", err)
	}
	return out, nil
}
