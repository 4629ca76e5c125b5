package wallet

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// This file runs the statements of the wallet's aggregates: users, wallets, the ledger,
// balance events (read side), operations and idempotency keys, each in its own file in sql/.
// The outbox's relay side is in outbox.go, the operator's audit in operator.go.

var (
	//go:embed sql/insert_user.sql
	insertUserSQL string
	//go:embed sql/get_user.sql
	getUserSQL string
	//go:embed sql/get_wallets.sql
	getWalletsSQL string
	//go:embed sql/get_wallet.sql
	getWalletSQL string
	//go:embed sql/lock_wallets.sql
	lockWalletsSQL string
	//go:embed sql/apply_change.sql
	applyChangeSQL string
	//go:embed sql/insert_operation.sql
	insertOperationSQL string
	//go:embed sql/get_idempotency_key.sql
	getIdempotencyKeySQL string
	//go:embed sql/insert_idempotency_key.sql
	insertIdempotencyKeySQL string
	//go:embed sql/get_operation.sql
	getOperationSQL string
	//go:embed sql/get_operations.sql
	getOperationsSQL string
	//go:embed sql/list_user_operations.sql
	listUserOperationsSQL string
	//go:embed sql/list_events.sql
	listEventsSQL string
	//go:embed sql/prune_idempotency_keys.sql
	pruneIdempotencyKeysSQL string
	//go:embed sql/mark_operations_pruned.sql
	markOperationsPrunedSQL string
	//go:embed sql/prune_operations.sql
	pruneOperationsSQL string
	//go:embed sql/oldest_pruned_operation.sql
	oldestPrunedOperationSQL string
	//go:embed sql/oldest_idempotency_key.sql
	oldestIdempotencyKeySQL string
)

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func userNotFound(id int64) error { return apperr.New(apperr.NotFound, "user %d not found", id) }

// constraintUserID is the users table's primary key, which refuses a new user's id when
// another user has it. The id is minted from the clock and random bits, drawn again when
// taken (migrations/wallet/00028_user_ids.sql); but two sign-ups in one millisecond may draw
// the same bits, and neither sees the other's row before it commits.
const constraintUserID = "users_pkey"

// userIDAttempts bounds insertUser's tries. Each draws a new id; a collision is 1 in 4,096
// for two sign-ups in the same millisecond, so a third in a row means something else is
// wrong (an insert that names its ids, a clock stuck on one millisecond).
const userIDAttempts = 3

// insertUser creates u and its wallet in one statement, which it sends again, for a new id,
// when the id drawn was taken. q must not be a transaction: the refused statement would
// abort it.
func insertUser(ctx context.Context, q querier, u NewUser) (User, Wallet, error) {
	for attempt := 1; ; attempt++ {
		var user User
		var w Wallet
		err := q.QueryRow(ctx, insertUserSQL, pg.Args{"name": u.Name, "phone": u.Phone, "locale": u.Locale, "currency": u.Currency}).Scan(
			&user.ID, &user.Name, &user.Phone, &user.Locale, &user.CreatedAt, &w.Balance, &w.Currency, &w.LastSeq)
		switch {
		case pg.IsViolation(err, pgerrcode.UniqueViolation, constraintUserID) && attempt < userIDAttempts:
			continue
		case err != nil:
			return User{}, Wallet{}, fmt.Errorf("wallet: insert user (attempt %d): %w", attempt, err)
		}
		w.UserID = user.ID
		return user, w, nil
	}
}

func getUser(ctx context.Context, q querier, id int64) (User, error) {
	var u User
	err := q.QueryRow(ctx, getUserSQL, pg.Args{"id": id}).
		Scan(&u.ID, &u.Name, &u.Phone, &u.Locale, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, userNotFound(id)
	}
	if err != nil {
		return User{}, fmt.Errorf("wallet: get user: %w", err)
	}
	return u, nil
}

// getWallets reads two wallets in one query, in the order asked.
func getWallets(ctx context.Context, q querier, a, b int64) ([2]Wallet, error) {
	var out [2]Wallet
	rows, err := q.Query(ctx, getWalletsSQL, pg.Args{"user_ids": []int64{a, b}})
	if err != nil {
		return out, fmt.Errorf("wallet: get wallets: %w", err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Wallet, error) {
		var w Wallet
		err := r.Scan(&w.UserID, &w.Balance, &w.Currency, &w.LastSeq)
		return w, err
	})
	if err != nil {
		return out, fmt.Errorf("wallet: get wallets: %w", err)
	}
	for i, id := range []int64{a, b} {
		found := false
		for _, w := range ws {
			if w.UserID == id {
				out[i], found = w, true
			}
		}
		if !found {
			return out, userNotFound(id)
		}
	}
	return out, nil
}

func getWallet(ctx context.Context, q querier, userID int64) (Wallet, error) {
	w := Wallet{UserID: userID}
	err := q.QueryRow(ctx, getWalletSQL, pg.Args{"user_id": userID}).
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
	// LockFirst, when set, are wallets to lock (in user-id order) before this one changes:
	// a transfer locks both of its wallets so that two opposite transfers cannot deadlock.
	LockFirst []int64
	// Traceparent is the W3C traceparent of the saga commit making the change ("" when
	// untraced), stored with the outbox row so that the trace goes on to the SMS.
	Traceparent string
	// NoEpoch writes the event without an epoch, as the previous release did: its body is
	// version 1, which a notifier of that release reads (Options.EventVersion 1).
	NoEpoch bool
}

// Applied is what ApplyChange did.
type Applied struct {
	// Applied is false when this (saga, step, user) had already changed the balance: nothing
	// was done the second time.
	Applied      bool
	EventID      int64
	Seq          int64
	BalanceAfter Money
	// Event is the outbox row written, as the relay reads it (when Applied).
	Event PendingEvent
	// PredKnown tells whether Event is complete and its Pred known: false when the user's
	// previous event committed after the statement's snapshot, so whether it is published
	// is not known, or when the event could not be encoded (the relay reads the row then).
	PredKnown bool

	found bool // the wallet exists
}

// The constraints a balance change's statement runs into (migrations/00003_wallet.sql).
const (
	constraintBalanceNonNegative = "wallets_balance_check"
	constraintStepOnce           = "ledger_entries_step_once"
)

// QueueChange queues one balance change on b, as a single statement that changes the
// balance under the wallet row lock, advances the user's event_seq, and inserts the ledger
// row and the outbox row with that seq. A (saga, step, user) already in the ledger changes
// nothing. It is meant for a saga step's commit (a pgx.Batch sent as one round trip and one
// transaction), so it does not check first and report: it fails, rolling the whole batch
// back, when the change cannot apply, and changeError says why: ErrInsufficientFunds (the
// wallets CHECK refuses a negative balance), ErrBalanceOverflow (bigint out of range), or
// errAlreadyApplied (the ledger's UNIQUE (saga, step, user), when a concurrent commit applied
// the same step first). LockFirst, when set, locks those wallets first, in user-id order.
// got, when not nil, receives the result.
func QueueChange(b *pgx.Batch, c Change, got *Applied) {
	if len(c.LockFirst) > 0 {
		b.Queue(lockWalletsSQL, pg.Args{"user_ids": c.LockFirst})
	}
	q := b.Queue(applyChangeSQL, pg.Args{
		"user_id": c.UserID, "saga_id": c.SagaID, "step": c.Step, "amount": int64(c.Amount), "kind": string(c.Kind),
		"traceparent": c.Traceparent, "epochs": !c.NoEpoch,
	})
	if got != nil {
		q.QueryRow(func(row pgx.Row) error {
			var (
				id, seq, after, pred *int64
				epoch, since         *int64
				currency, phone, loc *string
				at                   *time.Time
				predPublished        *bool
			)
			if err := row.Scan(&id, &seq, &after, &currency, &phone, &loc, &at, &epoch, &since, &pred, &predPublished, &got.found); err != nil {
				return err
			}
			if id == nil {
				return nil
			}
			got.Applied, got.EventID, got.Seq, got.BalanceAfter = true, *id, *seq, Money(*after)
			ev, err := pendingEvent(walletevent.Event{EventID: *id, UserID: c.UserID, Seq: *seq, Kind: c.Kind,
				Amount: int64(c.Amount), Currency: *currency, BalanceAfter: *after, SagaID: c.SagaID,
				Phone: *phone, Locale: *loc, OccurredAt: *at, Epoch: *epoch, EpochSince: *since}, c.Traceparent)
			if err != nil {
				// Not an error of the change, which is made: the relay reads the row instead.
				got.Event = PendingEvent{ID: *id, UserID: c.UserID, Seq: *seq}
				return nil //nolint:nilerr // the row stands; only its hand-over is given up
			}
			// The previous event's row is read in the statement's snapshot: when it committed
			// after that (this statement waited for the wallet's row lock), it is not seen,
			// and whether it is published is not known.
			switch {
			case *seq == 1:
				got.PredKnown = true
			case pred != nil:
				got.PredKnown = true
				if !*predPublished {
					ev.Pred = *pred
				}
			}
			got.Event = ev
			return nil
		})
	}
}

// errAlreadyApplied means a change's (saga, step, user) is in the ledger already.
var errAlreadyApplied = errors.New("wallet: change already applied")

// changeError translates the error of QueueChange's statement (by SQLSTATE and constraint);
// other errors pass as they are.
func changeError(err error) error {
	switch {
	case pg.IsViolation(err, pgerrcode.CheckViolation, constraintBalanceNonNegative):
		return ErrInsufficientFunds
	case pg.IsCode(err, pgerrcode.NumericValueOutOfRange):
		return ErrBalanceOverflow
	case pg.IsViolation(err, pgerrcode.UniqueViolation, constraintStepOnce):
		return errAlreadyApplied
	}
	return err
}

// ApplyChange changes a balance inside tx, the caller's transaction, with QueueChange's
// statement, and reports what it did: a (saga, step, user) that already changed the balance
// changes nothing and reports Applied=false; ErrInsufficientFunds below zero,
// ErrBalanceOverflow beyond int64; an unknown user is a not_found *apperr.Error. A refused
// change aborts tx (Postgres refuses any further statement in it).
func ApplyChange(ctx context.Context, tx pgx.Tx, c Change) (Applied, error) {
	if c.Amount == 0 || !c.Kind.Valid() || c.Step == "" || c.SagaID <= 0 {
		return Applied{}, fmt.Errorf("wallet: invalid change %+v", c)
	}
	var got Applied
	b := &pgx.Batch{}
	QueueChange(b, c, &got)
	err := changeError(tx.SendBatch(ctx, b).Close())
	switch {
	case errors.Is(err, errAlreadyApplied):
		return Applied{}, nil
	case err != nil:
		return Applied{}, err
	case !got.found:
		return Applied{}, userNotFound(c.UserID)
	}
	got.found = false
	return got, nil
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
	Destination    string
	// Credited is the wallet the saga credits (a deposit's user, a transfer's payee; 0 for
	// none): its first commit refuses an amount that wallet cannot take.
	Credited int64
	// Pruned is set once retention pruned the saga (pruned_at): the row stays a while, so
	// the saga's id answers gone, and no list reads it.
	Pruned bool
}

// constraintOperationAmount is wallet_operations' CHECK (amount > 0), which queueOperation
// uses to refuse a credit the wallet cannot take.
const constraintOperationAmount = "wallet_operations_amount_check"

// queueOperation queues the insert of the wallet's row for a saga, which is also the request's
// check: an unknown user (payer or payee) fails its foreign keys, and when the credited
// wallet's balance cannot take the amount (beyond MaxBalance), the row is written with amount
// 0, which its CHECK refuses (constraintOperationAmount). Either way the saga's first commit
// fails whole, before anything else took effect.
func queueOperation(b *pgx.Batch, op operationRow) {
	b.Queue(insertOperationSQL, pg.Args{
		"saga_id": op.SagaID, "kind": op.Kind, "user_id": op.UserID, "counterparty_id": op.CounterpartyID,
		"amount": int64(op.Amount), "currency": op.Currency, "merchant": op.Merchant, "reference": op.Reference,
		"source": op.Source, "credited": op.Credited, "destination": op.Destination,
	})
}

// operation is the wallet's view of a saga: this row with the engine's snapshot.
func (op operationRow) operation(snap saga.Snapshot) Operation {
	return Operation{
		ID: op.SagaID, Kind: op.Kind, State: snap.State, UserID: op.UserID, CounterpartyID: op.CounterpartyID,
		Amount: op.Amount, Currency: op.Currency, Merchant: op.Merchant, Reference: op.Reference, Source: op.Source,
		Destination: op.Destination, ProviderKeyPrefix: snap.KeyPrefix, Steps: snap.Steps, Error: snap.Error,
		CreatedAt: snap.CreatedAt, UpdatedAt: snap.UpdatedAt,
	}
}

// lookupIdempotencyKey returns the request hash and saga of (user, key), found=false if none.
func lookupIdempotencyKey(ctx context.Context, q querier, userID int64, key string) (hash []byte, sagaID int64, found bool, err error) {
	err = q.QueryRow(ctx, getIdempotencyKeySQL, pg.Args{"user_id": userID, "key": key}).
		Scan(&hash, &sagaID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("wallet: idempotency lookup: %w", err)
	}
	return hash, sagaID, true, nil
}

// constraintIdempotencyKey is the key's primary key: a second request with the same key
// (concurrent or later) fails its first commit on it.
const constraintIdempotencyKey = "idempotency_keys_pkey"

// queueIdempotencyKey queues the claim of (user, key) for a saga.
func queueIdempotencyKey(b *pgx.Batch, userID int64, key string, hash []byte, sagaID int64) {
	b.Queue(insertIdempotencyKeySQL, pg.Args{"user_id": userID, "key": key, "request_hash": hash, "saga_id": sagaID})
}

// Errors of a saga's first commit (see startError).
var (
	// errKeyTaken: another saga holds the request's Idempotency-Key.
	errKeyTaken = errors.New("wallet: idempotency key taken")
	// errUnknownUser: the payer or the payee does not exist.
	errUnknownUser = errors.New("wallet: unknown user")
	// errCreditTooLarge: the credited wallet cannot take the amount.
	errCreditTooLarge = errors.New("wallet: credit beyond the largest balance")
)

// startError translates the error of a saga's first commit, by SQLSTATE and constraint, into
// what the statements of queueOperation and queueIdempotencyKey mean by it; other errors
// pass as they are.
func startError(err error) error {
	switch {
	case pg.IsViolation(err, pgerrcode.UniqueViolation, constraintIdempotencyKey):
		return errKeyTaken
	case pg.IsCode(err, pgerrcode.ForeignKeyViolation):
		return errUnknownUser
	case pg.IsViolation(err, pgerrcode.CheckViolation, constraintOperationAmount):
		return errCreditTooLarge
	}
	return err
}

func scanOperationRow(row pgx.Row) (operationRow, error) {
	var op operationRow
	err := row.Scan(&op.SagaID, &op.Kind, &op.UserID, &op.CounterpartyID, &op.Amount, &op.Currency,
		&op.Merchant, &op.Reference, &op.Source, &op.Destination, &op.Pruned)
	return op, err
}

// getOperation reads the wallet's row of a saga (Pruned once retention pruned the saga), or
// NotFound. The saga's state is the engine's: the caller asks it (saga.Engine.Get) and joins
// the two (operationRow.operation).
func getOperation(ctx context.Context, q querier, sagaID int64) (operationRow, error) {
	op, err := scanOperationRow(q.QueryRow(ctx, getOperationSQL, pg.Args{"saga_id": sagaID}))
	if errors.Is(err, pgx.ErrNoRows) {
		return operationRow{}, apperr.New(apperr.NotFound, "saga %d not found", sagaID)
	}
	if err != nil {
		return operationRow{}, fmt.Errorf("wallet: get operation: %w", err)
	}
	return op, nil
}

// getOperations reads the wallet's rows of the sagas ids, by saga id; an id without one is
// left out.
func getOperations(ctx context.Context, q querier, ids []int64) (map[int64]operationRow, error) {
	rows, err := q.Query(ctx, getOperationsSQL, pg.Args{"saga_ids": ids})
	if err != nil {
		return nil, fmt.Errorf("wallet: get operations: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (operationRow, error) { return scanOperationRow(r) })
	if err != nil {
		return nil, fmt.Errorf("wallet: get operations: %w", err)
	}
	out := make(map[int64]operationRow, len(ops))
	for _, op := range ops {
		out[op.SagaID] = op
	}
	return out, nil
}

// listUserOperations reads up to limit of the wallet's rows of kept sagas in which user pays
// or receives, with a saga id below before (0: no bound), newest first. The rows of pruned
// sagas are not in the indexes it reads, so a user's list never walks them.
func listUserOperations(ctx context.Context, q querier, user, before int64, limit int) ([]operationRow, error) {
	cursor := int64(math.MaxInt64)
	if before > 0 {
		cursor = before
	}
	rows, err := q.Query(ctx, listUserOperationsSQL, pg.Args{"user_id": user, "before": cursor, "limit": limit})
	if err != nil {
		return nil, fmt.Errorf("wallet: list operations: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (operationRow, error) { return scanOperationRow(r) })
	if err != nil {
		return nil, fmt.Errorf("wallet: list operations: %w", err)
	}
	return ops, nil
}

func listEvents(ctx context.Context, q querier, userID int64, f EventFilter) ([]Event, error) {
	rows, err := q.Query(ctx, listEventsSQL, pg.Args{"user_id": userID, "after_seq": f.AfterSeq, "limit": f.Limit})
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

// pruneIdempotencyKeys deletes up to limit idempotency keys taken more than window ago,
// oldest first, skipping keys others hold locked. A request that comes back with a pruned key
// is a new request (docs/API.md, the wallet API).
func pruneIdempotencyKeys(ctx context.Context, q querier, window time.Duration, limit int) (int64, error) {
	tag, err := q.Exec(ctx, pruneIdempotencyKeysSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("wallet: prune idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// markOperationsPruned marks the wallet's rows of the sagas ids pruned, in tx, the
// transaction in which the saga engine deletes those sagas (saga.Pruned): from that commit
// on, the saga's id answers gone and no user's list reads the row.
func markOperationsPruned(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if _, err := tx.Exec(ctx, markOperationsPrunedSQL, pg.Args{"saga_ids": ids}); err != nil {
		return fmt.Errorf("wallet: mark the operations of %d pruned sagas: %w", len(ids), err)
	}
	return nil
}

// pruneOperations deletes up to limit of the wallet's rows whose saga was pruned more than
// window ago, oldest first, skipping rows others hold locked. The row of a kept saga is never
// deleted: the statement cannot select one.
func pruneOperations(ctx context.Context, q querier, window time.Duration, limit int) (int64, error) {
	tag, err := q.Exec(ctx, pruneOperationsSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("wallet: prune operations: %w", err)
	}
	return tag.RowsAffected(), nil
}

// age runs sql, which returns an age in seconds or NULL, and returns it (0 for NULL).
func age(ctx context.Context, q querier, sql string) (time.Duration, error) {
	d, err := pg.Age(ctx, q, sql)
	if err != nil {
		return 0, fmt.Errorf("wallet: oldest row: %w", err)
	}
	return d, nil
}
