package wallet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// This file holds the SQL of the wallet's aggregates: users, wallets, the ledger, balance
// events (read side), operations and idempotency keys. The outbox's relay side is in
// outbox.go, the simulators' tables in simulators.go.

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// withTx runs fn in a transaction and commits it if fn returns nil. The rollback runs on a
// fresh context so that a cancelled request still releases its locks at once.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("wallet: begin: %w", err)
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("wallet: commit: %w", err)
	}
	return nil
}

// isUniqueViolation reports whether err is a unique violation of the named constraint
// ("" = any).
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && (constraint == "" || pgErr.ConstraintName == constraint)
}

func userNotFound(id int64) error { return apperr.New(apperr.NotFound, "user %d not found", id) }

func insertUser(ctx context.Context, q querier, u NewUser) (User, Wallet, error) {
	const sql = `
WITH u AS (
    INSERT INTO users (name, phone, locale) VALUES ($1, $2, $3)
    RETURNING id, name, phone, locale, created_at
), w AS (
    INSERT INTO wallets (user_id, currency) SELECT id, $4 FROM u
    RETURNING user_id, balance, currency, event_seq
)
SELECT u.id, u.name, u.phone, u.locale, u.created_at, w.balance, w.currency, w.event_seq
FROM u JOIN w ON w.user_id = u.id`
	var user User
	var w Wallet
	err := q.QueryRow(ctx, sql, u.Name, u.Phone, u.Locale, u.Currency).Scan(
		&user.ID, &user.Name, &user.Phone, &user.Locale, &user.CreatedAt, &w.Balance, &w.Currency, &w.LastSeq)
	if err != nil {
		return User{}, Wallet{}, fmt.Errorf("wallet: insert user: %w", err)
	}
	w.UserID = user.ID
	return user, w, nil
}

func getUser(ctx context.Context, q querier, id int64) (User, error) {
	var u User
	err := q.QueryRow(ctx, `SELECT id, name, phone, locale, created_at FROM users WHERE id = $1`, id).
		Scan(&u.ID, &u.Name, &u.Phone, &u.Locale, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, userNotFound(id)
	}
	if err != nil {
		return User{}, fmt.Errorf("wallet: get user: %w", err)
	}
	return u, nil
}

func getWallet(ctx context.Context, q querier, userID int64) (Wallet, error) {
	w := Wallet{UserID: userID}
	err := q.QueryRow(ctx, `SELECT balance, currency, event_seq FROM wallets WHERE user_id = $1`, userID).
		Scan(&w.Balance, &w.Currency, &w.LastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return Wallet{}, userNotFound(userID)
	}
	if err != nil {
		return Wallet{}, fmt.Errorf("wallet: get wallet: %w", err)
	}
	return w, nil
}

// Change is one balance change made by a saga step.
type Change struct {
	UserID int64
	SagaID int64
	Step   string // unique per (saga, user): the ledger refuses a second change
	Amount Money  // signed: negative debits
	Kind   walletevent.Kind
}

// Applied is what ApplyChange did.
type Applied struct {
	// Applied is false when this (saga, step, user) had already changed the balance: nothing
	// was done the second time.
	Applied      bool
	EventID      int64
	Seq          int64
	BalanceAfter Money
}

// ApplyChange changes a balance inside tx, the caller's (a saga's local step) transaction:
// it locks the wallet row, checks the result (ErrInsufficientFunds below zero,
// ErrBalanceOverflow beyond int64), writes the ledger row, advances the user's event_seq and
// inserts the outbox row with that seq, and notifies the relay (delivered on commit).
// A (saga, step, user) that already changed the balance changes nothing and reports
// Applied=false. An unknown user is a not_found *apperr.Error.
func ApplyChange(ctx context.Context, tx pgx.Tx, c Change) (Applied, error) {
	if c.Amount == 0 || !c.Kind.Valid() || c.Step == "" || c.SagaID <= 0 {
		return Applied{}, fmt.Errorf("wallet: invalid change %+v", c)
	}
	var (
		balance  Money
		currency string
		phone    string
		locale   string
	)
	err := tx.QueryRow(ctx, `
SELECT w.balance, w.currency, u.phone, u.locale
FROM wallets w JOIN users u ON u.id = w.user_id
WHERE w.user_id = $1
FOR UPDATE OF w`, c.UserID).Scan(&balance, &currency, &phone, &locale)
	if errors.Is(err, pgx.ErrNoRows) {
		return Applied{}, userNotFound(c.UserID)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("wallet: lock wallet %d: %w", c.UserID, err)
	}
	after, addErr := balance.Add(c.Amount)
	if addErr != nil || after < 0 {
		// A replay of a change that already applied must not fail now that the balance has
		// moved on; look before reporting. The wallet row lock makes this read current.
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_entries WHERE saga_id = $1 AND step = $2 AND user_id = $3)`,
			c.SagaID, c.Step, c.UserID).Scan(&done); err != nil {
			return Applied{}, fmt.Errorf("wallet: ledger lookup: %w", err)
		}
		switch {
		case done:
			return Applied{}, nil
		case addErr != nil:
			return Applied{}, ErrBalanceOverflow
		default:
			return Applied{}, ErrInsufficientFunds
		}
	}
	// One statement: the ledger row first (ON CONFLICT: this step already applied, so the
	// rest does nothing), then the conditional balance update, then the outbox row with the
	// next seq. We hold the row lock, so the seq cannot race.
	var ledgerID, eventID, seq *int64
	batch := &pgx.Batch{}
	batch.Queue(`
WITH l AS (
    INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT ON CONSTRAINT ledger_entries_step_once DO NOTHING
    RETURNING id
), w AS (
    UPDATE wallets SET balance = balance + $4, event_seq = event_seq + 1, updated_at = now()
    WHERE user_id = $1 AND balance + $4 >= 0 AND EXISTS (SELECT 1 FROM l)
    RETURNING event_seq
), e AS (
    INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
    SELECT $1, w.event_seq, $6, $4, $7, $5, $2, $8, $9 FROM w
    RETURNING id, seq
)
SELECT (SELECT id FROM l), (SELECT id FROM e), (SELECT seq FROM e)`,
		c.UserID, c.SagaID, c.Step, int64(c.Amount), int64(after), string(c.Kind), currency, phone, locale,
	).QueryRow(func(row pgx.Row) error { return row.Scan(&ledgerID, &eventID, &seq) })
	batch.Queue(`SELECT pg_notify($1, $2)`, NotifyChannel, strconv.FormatInt(c.UserID, 10)).Exec(func(pgconn.CommandTag) error { return nil })
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return Applied{}, fmt.Errorf("wallet: apply change: %w", err)
	}
	switch {
	case ledgerID == nil:
		return Applied{}, nil
	case eventID == nil || seq == nil:
		// Impossible while we hold the lock; fail rather than leave a ledger row without its event.
		return Applied{}, fmt.Errorf("wallet: balance update of user %d did not apply", c.UserID)
	}
	return Applied{Applied: true, EventID: *eventID, Seq: *seq, BalanceAfter: after}, nil
}

// operationRow is what wallet_operations holds for one saga.
type operationRow struct {
	SagaID         int64
	Kind           string
	UserID         int64
	CounterpartyID int64
	Amount         Money
	Currency       string
	Merchant       string
	Reference      string
	Source         string
}

func insertOperation(ctx context.Context, tx pgx.Tx, op operationRow) error {
	_, err := tx.Exec(ctx, `
INSERT INTO wallet_operations (saga_id, kind, user_id, counterparty_id, amount, currency, merchant, reference, source)
VALUES ($1, $2, $3, NULLIF($4, 0), $5, $6, NULLIF($7, ''), NULLIF($8, ''), NULLIF($9, ''))`,
		op.SagaID, op.Kind, op.UserID, op.CounterpartyID, int64(op.Amount), op.Currency, op.Merchant, op.Reference, op.Source)
	if err != nil {
		return fmt.Errorf("wallet: insert operation: %w", err)
	}
	return nil
}

// lookupIdempotencyKey returns the request hash and saga of (user, key), found=false if none.
func lookupIdempotencyKey(ctx context.Context, q querier, userID int64, key string) (hash []byte, sagaID int64, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT request_hash, saga_id FROM idempotency_keys WHERE user_id = $1 AND key = $2`, userID, key).
		Scan(&hash, &sagaID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("wallet: idempotency lookup: %w", err)
	}
	return hash, sagaID, true, nil
}

// errKeyTaken means a concurrent request inserted the same idempotency key first.
var errKeyTaken = errors.New("wallet: idempotency key taken concurrently")

func insertIdempotencyKey(ctx context.Context, tx pgx.Tx, userID int64, key string, hash []byte, sagaID int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (user_id, key, request_hash, saga_id) VALUES ($1, $2, $3, $4)`,
		userID, key, hash, sagaID)
	if isUniqueViolation(err, "idempotency_keys_pkey") {
		return errKeyTaken
	}
	if err != nil {
		return fmt.Errorf("wallet: insert idempotency key: %w", err)
	}
	return nil
}

const operationColumns = `o.saga_id, o.kind, s.state, o.user_id, COALESCE(o.counterparty_id, 0), o.amount, o.currency,
       COALESCE(o.merchant, ''), COALESCE(o.reference, ''), COALESCE(o.source, ''),
       s.error_code, s.error_message, s.created_at, s.updated_at`

func scanOperation(row pgx.Row) (Operation, error) {
	var (
		op        Operation
		state     string
		code, msg *string
	)
	if err := row.Scan(&op.ID, &op.Kind, &state, &op.UserID, &op.CounterpartyID, &op.Amount, &op.Currency,
		&op.Merchant, &op.Reference, &op.Source, &code, &msg, &op.CreatedAt, &op.UpdatedAt); err != nil {
		return Operation{}, err
	}
	op.State = saga.State(state)
	if code != nil || msg != nil {
		op.Error = &saga.ErrorInfo{}
		if code != nil {
			op.Error.Code = *code
		}
		if msg != nil {
			op.Error.Message = *msg
		}
	}
	return op, nil
}

func getOperation(ctx context.Context, q querier, sagaID int64) (Operation, error) {
	op, err := scanOperation(q.QueryRow(ctx, `
SELECT `+operationColumns+`
FROM wallet_operations o JOIN sagas s ON s.id = o.saga_id
WHERE o.saga_id = $1`, sagaID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, apperr.New(apperr.NotFound, "saga %d not found", sagaID)
	}
	if err != nil {
		return Operation{}, fmt.Errorf("wallet: get operation: %w", err)
	}
	return op, nil
}

func listOperations(ctx context.Context, q querier, f SagaFilter) ([]Operation, error) {
	// NULL parameters switch a filter off; the cursor is an exclusive upper bound on the id.
	var user, cursor *int64
	var state *string
	if f.UserID != 0 {
		user = &f.UserID
	}
	if f.State != "" {
		s := string(f.State)
		state = &s
	}
	if f.Cursor != 0 {
		cursor = &f.Cursor
	}
	rows, err := q.Query(ctx, `
SELECT `+operationColumns+`
FROM wallet_operations o JOIN sagas s ON s.id = o.saga_id
WHERE ($1::bigint IS NULL OR o.user_id = $1 OR o.counterparty_id = $1)
  AND ($2::text IS NULL OR s.state = $2)
  AND ($3::bigint IS NULL OR o.saga_id < $3)
ORDER BY o.saga_id DESC
LIMIT $4`, user, state, cursor, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("wallet: list operations: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Operation, error) { return scanOperation(r) })
	if err != nil {
		return nil, fmt.Errorf("wallet: list operations: %w", err)
	}
	return ops, nil
}

func listEvents(ctx context.Context, q querier, userID int64, f EventFilter) ([]Event, error) {
	rows, err := q.Query(ctx, `
SELECT id, user_id, seq, kind, amount, currency, balance_after, saga_id, occurred_at, published_at IS NOT NULL
FROM wallet_events
WHERE user_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3`, userID, f.AfterSeq, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("wallet: list events: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var kind string
		err := r.Scan(&e.ID, &e.UserID, &e.Seq, &kind, &e.Amount, &e.Currency, &e.BalanceAfter, &e.SagaID, &e.OccurredAt, &e.Published)
		e.Kind = walletevent.Kind(kind)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("wallet: list events: %w", err)
	}
	return evs, nil
}
