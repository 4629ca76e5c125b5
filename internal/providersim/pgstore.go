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

	"github.com/walletsaga/walletsaga/internal/pg"
)

// Schema is the Postgres schema the simulator's tables and goose version table live in.
const Schema = "providersim"

// migrationLockID is the advisory lock goose holds while it migrates the simulator's schema:
// not goose's default, which the product's migrations take, so neither waits for the other.
const migrationLockID = 0x70726f7669646572 // "provider"

//go:embed migrations/*.sql
var migrationFiles embed.FS

// The store's statements, one a file in sql/.
var (
	//go:embed sql/create_schema.sql
	createSchemaSQL string
	//go:embed sql/charge.sql
	chargeSQL string
	//go:embed sql/refund.sql
	refundSQL string
	//go:embed sql/place_order.sql
	placeOrderSQL string
	//go:embed sql/cancel_order.sql
	cancelOrderSQL string
	//go:embed sql/payout.sql
	payoutSQL string
	//go:embed sql/cancel_payout.sql
	cancelPayoutSQL string
	//go:embed sql/list_charges.sql
	listChargesSQL string
	//go:embed sql/list_orders.sql
	listOrdersSQL string
	//go:embed sql/list_payouts.sql
	listPayoutsSQL string
)

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
	if _, err := pool.Exec(ctx, createSchemaSQL); err != nil {
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

func scanCharge(row pgx.Row) (Charge, error) {
	var c Charge
	err := row.Scan(&c.Key, &c.ID, &c.UserID, &c.Amount, &c.Currency, &c.Source, &c.Status, &c.RefundKey, &c.Attempts, &c.CreatedAt)
	return c, err
}

// Charge implements Store.
func (s *PostgresStore) Charge(ctx context.Context, c Charge) (Charge, error) {
	got, err := scanCharge(s.pool.QueryRow(ctx, chargeSQL, pg.Args{
		"key": c.Key, "charge_id": c.ID, "user_id": c.UserID, "amount": c.Amount, "currency": c.Currency, "source": c.Source, "status": c.Status,
	}))
	if err != nil {
		return Charge{}, fmt.Errorf("providersim: charge: %w", err)
	}
	return got, nil
}

// Refund implements Store.
func (s *PostgresStore) Refund(ctx context.Context, chargeKey, refundKey, voidID string) (Charge, error) {
	got, err := scanCharge(s.pool.QueryRow(ctx, refundSQL, pg.Args{"key": chargeKey, "charge_id": voidID, "refund_key": refundKey}))
	if err != nil {
		return Charge{}, fmt.Errorf("providersim: refund: %w", err)
	}
	return got, nil
}

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	err := row.Scan(&o.Key, &o.ID, &o.Merchant, &o.Reference, &o.Amount, &o.Currency, &o.Status, &o.CancelKey, &o.Attempts, &o.CreatedAt)
	return o, err
}

// PlaceOrder implements Store.
func (s *PostgresStore) PlaceOrder(ctx context.Context, o Order, pendingAttempts int) (Order, error) {
	got, err := scanOrder(s.pool.QueryRow(ctx, placeOrderSQL, pg.Args{
		"key": o.Key, "order_id": o.ID, "merchant": o.Merchant, "reference": o.Reference, "amount": o.Amount, "currency": o.Currency,
		"status": o.Status, "pending_attempts": pendingAttempts,
	}))
	if err != nil {
		return Order{}, fmt.Errorf("providersim: order: %w", err)
	}
	return got, nil
}

// CancelOrder implements Store.
func (s *PostgresStore) CancelOrder(ctx context.Context, orderKey, cancelKey, voidID string) (Order, error) {
	got, err := scanOrder(s.pool.QueryRow(ctx, cancelOrderSQL, pg.Args{"key": orderKey, "order_id": voidID, "cancel_key": cancelKey}))
	if err != nil {
		return Order{}, fmt.Errorf("providersim: cancel: %w", err)
	}
	return got, nil
}

func scanPayout(row pgx.Row) (Payout, error) {
	var p Payout
	err := row.Scan(&p.Key, &p.ID, &p.UserID, &p.Amount, &p.Currency, &p.Destination, &p.Status, &p.CancelKey, &p.Attempts, &p.CreatedAt)
	return p, err
}

// Payout implements Store.
func (s *PostgresStore) Payout(ctx context.Context, p Payout, pendingAttempts int) (Payout, error) {
	got, err := scanPayout(s.pool.QueryRow(ctx, payoutSQL, pg.Args{
		"key": p.Key, "payout_id": p.ID, "user_id": p.UserID, "amount": p.Amount, "currency": p.Currency, "destination": p.Destination,
		"status": p.Status, "pending_attempts": pendingAttempts,
	}))
	if err != nil {
		return Payout{}, fmt.Errorf("providersim: payout: %w", err)
	}
	return got, nil
}

// CancelPayout implements Store.
func (s *PostgresStore) CancelPayout(ctx context.Context, payoutKey, cancelKey, voidID string) (Payout, error) {
	got, err := scanPayout(s.pool.QueryRow(ctx, cancelPayoutSQL, pg.Args{"key": payoutKey, "payout_id": voidID, "cancel_key": cancelKey}))
	if err != nil {
		return Payout{}, fmt.Errorf("providersim: cancel payout: %w", err)
	}
	return got, nil
}

// Charges implements Store.
func (s *PostgresStore) Charges(ctx context.Context) ([]Charge, error) {
	rows, err := s.pool.Query(ctx, listChargesSQL)
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
	rows, err := s.pool.Query(ctx, listOrdersSQL)
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
	rows, err := s.pool.Query(ctx, listPayoutsSQL)
	if err != nil {
		return nil, fmt.Errorf("providersim: payouts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payout, error) { return scanPayout(r) })
	if err != nil {
		return nil, fmt.Errorf("providersim: payouts: %w", err)
	}
	return out, nil
}
