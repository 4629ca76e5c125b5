package wallet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Options configure a Service. Zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// Currency of wallets created without one (default CNY).
	Currency string
	// Steps tunes the attempts, timeouts and backoff of every saga step.
	Steps StepTuning
	// EventCommitted, when set, is told of each balance event a saga step wrote, once the
	// step's commit is done, so that a relay in this process can send it without reading
	// the outbox: ev is the row as OutboxStore.Pending would return it. complete is false
	// when ev.Pred is not known (the user's previous event committed after the step's
	// snapshot) or ev could not be built; the row is only in the outbox then. It must be
	// quick and must not block.
	EventCommitted func(ev PendingEvent, complete bool)
	// EventVersion is the version of the balance events' bodies the sagas write:
	// walletevent.Version (or 0) writes each event in the wallet's epoch; 1 writes them
	// without one, as the previous release did, so that a notifier of that release, which
	// refuses any other version, reads them while it runs beside this one (an upgrade). The
	// notifier's protection against a rewound history (a restore) is then off for those
	// events. The relay sends each outbox row as it was written.
	EventVersion int
}

// Service is the wallet's application service: users, wallets, and the sagas that move
// money. Its methods return *apperr.Error for anything a client did wrong.
type Service struct {
	pool   *pgxpool.Pool
	engine *saga.Engine
	log    *slog.Logger
	opts   Options
	// currencies caches the currency of the wallets used lately (user id → code), which never
	// changes once the wallet exists: with it, a request's checks ride on its saga's first
	// commit instead of a read before it. At most currencyCacheSize wallets, the least
	// recently used forgotten first: a process does not grow with the users it ever served.
	currencies *lru.Cache[int64, string]
}

// NewService returns a service on pool and registers the wallet's sagas (Kinds) on engine
// (which the caller runs).
func NewService(pool *pgxpool.Pool, engine *saga.Engine, gw PaymentGateway, m Merchant, opts Options) (*Service, error) {
	switch {
	case pool == nil:
		return nil, errors.New("wallet: nil pool")
	case engine == nil:
		return nil, errors.New("wallet: nil saga engine")
	case gw == nil:
		return nil, errors.New("wallet: nil payment gateway")
	case m == nil:
		return nil, errors.New("wallet: nil merchant")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Currency == "" {
		opts.Currency = DefaultCurrency
	}
	if err := ValidateCurrency(opts.Currency); err != nil {
		return nil, fmt.Errorf("wallet: options: %w", err)
	}
	if opts.EventVersion != 0 && opts.EventVersion != 1 && opts.EventVersion != walletevent.Version {
		return nil, fmt.Errorf("wallet: options: event version must be 1 or %d, got %d", walletevent.Version, opts.EventVersion)
	}
	p := parties{gateway: gw, merchant: m, committed: opts.EventCommitted, noEpoch: opts.EventVersion == 1}
	for _, d := range definitions(p, opts.Steps) {
		if err := engine.Register(d); err != nil {
			return nil, fmt.Errorf("wallet: %w", err)
		}
	}
	currencies, err := lru.New[int64, string](currencyCacheSize)
	if err != nil {
		return nil, fmt.Errorf("wallet: currency cache: %w", err)
	}
	return &Service{pool: pool, engine: engine, log: opts.Logger.With("component", "wallet"), opts: opts, currencies: currencies}, nil
}

// currencyCacheSize bounds the wallets whose currency a Service keeps: about 8 MB at most.
const currencyCacheSize = 100_000

// CreateUser creates a user and an empty wallet. Invalid input is an Invalid error.
func (s *Service) CreateUser(ctx context.Context, nu NewUser) (User, Wallet, error) {
	nu, err := nu.normalize(s.opts.Currency)
	if err != nil {
		return User{}, Wallet{}, err
	}
	u, w, err := insertUser(ctx, s.pool, nu)
	if err == nil {
		s.currencies.Add(w.UserID, w.Currency)
	}
	return u, w, err
}

// currencyOf returns the currency of userID's wallet from the cache, or reads the wallet
// (then w is set, for the request's checks) and caches its currency.
func (s *Service) currencyOf(ctx context.Context, userID int64) (currency string, w *Wallet, err error) {
	if c, ok := s.currencies.Get(userID); ok {
		return c, nil, nil
	}
	got, err := getWallet(ctx, s.pool, userID)
	if err != nil {
		return "", nil, err
	}
	s.currencies.Add(userID, got.Currency)
	return got.Currency, &got, nil
}

// GetUser returns a user, or a NotFound error.
func (s *Service) GetUser(ctx context.Context, id int64) (User, error) {
	if err := ValidateID("user id", id); err != nil {
		return User{}, err
	}
	return getUser(ctx, s.pool, id)
}

// GetWallet returns a user's wallet, or a NotFound error.
func (s *Service) GetWallet(ctx context.Context, userID int64) (Wallet, error) {
	if err := ValidateID("user id", userID); err != nil {
		return Wallet{}, err
	}
	return getWallet(ctx, s.pool, userID)
}

// checkCreditFits refuses, at request time, a credit of amount that would take w's balance
// beyond MaxBalance, so that the client hears it before a saga starts, a card is charged or
// an idempotency key is claimed (otherwise the deposit would charge, fail its credit step
// and refund). The balance is read without a lock, so a concurrent credit may still fill the
// wallet in between: the credit step's own check under the row lock (ErrBalanceOverflow,
// saga failed with balance_overflow) stays the guard that holds.
func checkCreditFits(w Wallet, amount Money) error {
	if _, err := w.Balance.Add(amount); err != nil {
		return apperr.New(apperr.BalanceOverflow,
			"user %d's wallet cannot take %d more minor units: a balance may be at most %d minor units (%s %s), and this one can take at most %d more",
			w.UserID, int64(amount), int64(MaxBalance), MaxBalance.FormatIn(w.Currency), w.Currency, int64(MaxBalance-w.Balance))
	}
	return nil
}

// start is the common path of the operations (each kind's Service method). prepare returns the saga input and the
// operation row (reading the wallets only for a currency not cached yet); then the saga
// starts in one commit with the operation row, which also checks that the users exist and
// that a credit fits the wallet, and the idempotency key (a key another request holds makes
// that commit fail, and the earlier saga is answered instead); and it runs inline or, with
// background, in the background.
func (s *Service) start(ctx context.Context, payer int64, key string, hash []byte, background bool,
	prepare func(ctx context.Context) (any, operationRow, error)) (Operation, error) {
	input, row, err := prepare(ctx)
	if err != nil {
		if key != "" && apperr.CodeOf(err) != apperr.Internal {
			// The request may be a retry of one that succeeded, and the wallet has moved on
			// since (a deposit that now would overflow): the key decides.
			if op, found, rerr := s.replay(ctx, payer, key, hash); found || rerr != nil {
				return op, rerr
			}
		}
		return Operation{}, err
	}
	st, err := s.engine.Start(ctx, row.Kind, input, func(id int64, b *pgx.Batch) {
		row.SagaID = id
		queueOperation(b, row)
		if key != "" {
			queueIdempotencyKey(b, payer, key, hash, id)
		}
	})
	err = startError(err)
	switch {
	case errors.Is(err, errKeyTaken):
		if op, found, rerr := s.replay(ctx, payer, key, hash); found || rerr != nil {
			return op, rerr
		}
		return Operation{}, apperr.New(apperr.Conflict, "Idempotency-Key %q is in use by a concurrent request; retry", key)
	case errors.Is(err, errUnknownUser):
		if _, err := getWallets(ctx, s.pool, row.UserID, max(row.CounterpartyID, row.UserID)); err != nil {
			return Operation{}, err
		}
		return Operation{}, userNotFound(payer)
	case errors.Is(err, errCreditTooLarge):
		// The credited wallet cannot take the amount. The request may be a retry of one that
		// succeeded (the wallet filled since): the key decides. Otherwise say how much it can.
		if key != "" {
			if op, found, rerr := s.replay(ctx, payer, key, hash); found || rerr != nil {
				return op, rerr
			}
		}
		w, gerr := getWallet(ctx, s.pool, row.Credited)
		if gerr != nil {
			return Operation{}, gerr
		}
		if err := checkCreditFits(w, row.Amount); err != nil {
			return Operation{}, err
		}
		return Operation{}, apperr.New(apperr.Conflict, "user %d's wallet was near its largest balance and changed meanwhile; retry", row.Credited)
	case err != nil:
		return Operation{}, fmt.Errorf("wallet: start %s saga: %w", row.Kind, err)
	}
	s.log.DebugContext(ctx, "saga started", "saga", st.ID(), "kind", row.Kind, "user", row.UserID, "amount", int64(row.Amount))
	if background {
		snap := st.Snapshot()
		s.engine.Go(st)
		return row.operation(snap), nil
	}
	// The saga runs to its end or first backoff even if the client goes away meanwhile: a
	// run cut short would wait for its lease to expire before recovery took it over.
	snap, err := s.engine.Drive(context.WithoutCancel(ctx), st)
	if err != nil {
		s.log.WarnContext(ctx, "saga run stopped; recovery will resume it", "saga", st.ID(), "err", err)
	}
	return row.operation(snap), nil
}

// replay returns the saga an earlier request with (payer, key) started, found=false if
// there was none, or Unprocessable if that request differed.
func (s *Service) replay(ctx context.Context, payer int64, key string, hash []byte) (Operation, bool, error) {
	prev, id, found, err := lookupIdempotencyKey(ctx, s.pool, payer, key)
	if err != nil || !found {
		return Operation{}, false, err
	}
	if !bytes.Equal(prev, hash) {
		return Operation{}, true, apperr.New(apperr.Unprocessable,
			"Idempotency-Key %q was already used with a different request (saga %d)", key, id)
	}
	op, err := s.GetSaga(ctx, id)
	op.Replayed = true
	return op, true, err
}

// requestHash identifies an operation's request for idempotency: its kind and normalised
// fields, each length-prefixed so no two field lists collide.
func requestHash(kind string, fields ...string) []byte {
	h := sha256.New()
	for _, f := range append([]string{kind}, fields...) {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return h.Sum(nil)
}

// GetSaga returns one of the wallet's sagas with its step history, or NotFound.
func (s *Service) GetSaga(ctx context.Context, id int64) (Operation, error) {
	if err := ValidateID("saga id", id); err != nil {
		return Operation{}, err
	}
	op, err := getOperation(ctx, s.pool, id)
	if err != nil {
		return Operation{}, err
	}
	if op.Pruned {
		return Operation{}, sagaGone(id)
	}
	snap, err := s.engine.Get(ctx, id)
	if errors.Is(err, saga.ErrNotFound) {
		// The wallet's row is there, so the saga was: retention pruned it after the row was read.
		return Operation{}, sagaGone(id)
	}
	if err != nil {
		return Operation{}, fmt.Errorf("wallet: get saga %d: %w", id, err)
	}
	return op.operation(snap), nil
}

// sagaGone is the error for a saga retention pruned (GetSaga, WaitSaga).
func sagaGone(id int64) error {
	return apperr.New(apperr.Gone, "saga %d finished longer ago than the retention window and its record was pruned; its ledger entries remain", id)
}

// WaitSaga waits until saga id is terminal or ctx ends, and returns it as it then stands
// (check State.Terminal). Errors as for GetSaga: a saga the engine does not have is Gone when
// retention pruned it, NotFound when it never was.
func (s *Service) WaitSaga(ctx context.Context, id int64) (Operation, error) {
	if err := ValidateID("saga id", id); err != nil {
		return Operation{}, err
	}
	// Engine.Wait reads the saga as soon as it has subscribed (a saga already terminal
	// returns at once), so no read of our own comes first; the wallet's operation row never
	// changes, so it is read once, after.
	snap, err := s.engine.Wait(ctx, id)
	switch {
	case errors.Is(err, saga.ErrNotFound):
		// Pruned or never there: GetSaga tells which, by the wallet's row.
		return s.GetSaga(ctx, id)
	case err == nil:
		op, err := getOperation(ctx, s.pool, id)
		if err != nil {
			return Operation{}, err
		}
		return op.operation(snap), nil
	case ctx.Err() == nil:
		return Operation{}, fmt.Errorf("wallet: wait for saga %d: %w", id, err)
	}
	// Out of time: answer with the saga as it stands now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return s.GetSaga(rctx, id)
}

// ListScanBudget is the most sagas one ListSagas call reads, whatever it is asked: with a
// user, that many of the user's operations (each read walks the user's two indexes, as payer
// and as payee, to at most the rows it asks for); without, that many of the engine's sagas.
// A page is full when enough of those match; when the budget runs out first, the page holds
// what matched so far (fewer than the limit, perhaps none) and its NextCursor is where the
// scan stopped, so that a client that follows it goes on from there. A user with a million
// completed sagas asking for its failed ones thus costs each request at most this many rows,
// not the million; the client pages through instead.
const ListScanBudget = 1000

// userChunk is how many of a user's operations ListSagas reads first when it filters them by
// state (a state other than the common one may be rare among them); every later read of the
// same call takes twice as many as the one before, up to maxScanBatch, within the budget.
const userChunk = 200

// maxScanBatch bounds the reads after the first of one ListSagas call that skips rows (their
// state is not the one asked for, or they are not the wallet's): each takes twice as many
// rows as the one before, up to this many (or the first read's size, when larger), so that a
// page of 1 that has to skip many rows takes a few round trips, not hundreds.
const maxScanBatch = 200

// ListSagas returns a page of the wallet's sagas, newest first. Errors: Invalid (bad
// filter), NotFound (no such user).
//
// The sagas' states are the engine's (saga.Engine.List), the rest is the wallet's own rows:
// without a user, the engine lists the newest sagas in the state asked for, and their rows
// are read by id (a saga without the wallet's row is not the wallet's: skipped); with a
// user, the wallet reads the user's rows, newest first, and the engine keeps those in the
// state asked for. Either way it reads in batches until the page is full or the history
// ends, and at most ListScanBudget rows: a page may then hold fewer than Limit sagas, even
// none, with NextCursor set; only a page without NextCursor is the last.
func (s *Service) ListSagas(ctx context.Context, f SagaFilter) (SagaPage, error) {
	page, _, err := s.listSagas(ctx, f, userChunk, ListScanBudget)
	return page, err
}

// listSagas is ListSagas reading first chunk of a user's operations when it filters them by
// state, and at most budget rows in all; it also returns how many rows it read.
func (s *Service) listSagas(ctx context.Context, f SagaFilter, chunk, budget int) (SagaPage, int, error) {
	switch {
	case f.Limit == 0:
		f.Limit = 20
	case f.Limit < 1 || f.Limit > 100:
		return SagaPage{}, 0, apperr.New(apperr.Invalid, "limit must be between 1 and 100, got %d", f.Limit)
	}
	if f.Cursor < 0 {
		return SagaPage{}, 0, apperr.New(apperr.Invalid, "cursor must be a positive integer, got %d", f.Cursor)
	}
	if f.State != "" && !validState(f.State) {
		return SagaPage{}, 0, apperr.New(apperr.Invalid,
			"state must be one of running, compensating, completed, compensated, failed, needs_attention, resolved; got %q", f.State)
	}
	if f.UserID != 0 {
		if _, err := s.GetUser(ctx, f.UserID); err != nil {
			return SagaPage{}, 0, err
		}
		first := f.Limit + 1
		if f.State != "" {
			first = max(first, chunk)
		}
		return s.listUserSagas(ctx, f, first, budget)
	}
	// The first read asks for one more than the page, which tells whether there is a next
	// page. Every saga the engine returns counts against the budget, of whichever kind:
	// the wallet's row is what makes a saga the wallet's (the engine's own kind filter
	// would skip other kinds' sagas in the index without a bound).
	sc := newScan(f.Limit+1, budget)
	var found []Operation
	for before := f.Cursor; len(found) <= f.Limit; {
		n := sc.next()
		if n == 0 {
			return SagaPage{Items: found, NextCursor: before}, sc.read, nil
		}
		snaps, err := s.engine.List(ctx, saga.ListFilter{State: f.State, Before: before, Limit: n})
		if err != nil {
			return SagaPage{}, sc.read, fmt.Errorf("wallet: list sagas: %w", err)
		}
		sc.read += len(snaps)
		if len(snaps) == 0 {
			break
		}
		ids := make([]int64, len(snaps))
		for i, snap := range snaps {
			ids[i] = snap.ID
		}
		rows, err := getOperations(ctx, s.pool, ids)
		if err != nil {
			return SagaPage{}, sc.read, err
		}
		for _, snap := range snaps {
			if row, ok := rows[snap.ID]; ok {
				found = append(found, row.operation(snap))
			}
		}
		if len(snaps) < n {
			break
		}
		before = snaps[len(snaps)-1].ID
	}
	return pageOf(found, f.Limit), sc.read, nil
}

// scan counts the rows one ListSagas call reads against its budget, and sizes its reads:
// the first as asked, each later one twice the one before (at most maxScanBatch, or the
// first's size when larger), none beyond the budget.
type scan struct {
	batch, maxBatch, read, budget int
}

func newScan(first, budget int) *scan {
	return &scan{batch: first, maxBatch: max(first, maxScanBatch), budget: budget}
}

// next returns how many rows the next read takes: 0 once the budget is spent.
func (s *scan) next() int {
	n := min(s.batch, s.budget-s.read)
	s.batch = min(2*s.batch, s.maxBatch)
	return max(n, 0)
}

// pageOf cuts found, newest first, to a page of limit (found holds one more when there is a
// next page).
func pageOf(found []Operation, limit int) SagaPage {
	page := SagaPage{Items: found}
	if len(found) > limit {
		page.Items = found[:limit]
		page.NextCursor = found[limit-1].ID
	}
	return page
}

// listUserSagas is ListSagas for one user's sagas, reading first of the user's operations,
// then more in growing batches (see scan), at most budget in all.
func (s *Service) listUserSagas(ctx context.Context, f SagaFilter, first, budget int) (SagaPage, int, error) {
	sc := newScan(first, budget)
	var found []Operation
	for before := f.Cursor; len(found) <= f.Limit; {
		n := sc.next()
		if n == 0 {
			return SagaPage{Items: found, NextCursor: before}, sc.read, nil
		}
		rows, err := listUserOperations(ctx, s.pool, f.UserID, before, n)
		if err != nil {
			return SagaPage{}, sc.read, err
		}
		sc.read += len(rows)
		if len(rows) == 0 {
			break
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.SagaID
		}
		snaps, err := s.engine.List(ctx, saga.ListFilter{IDs: ids, State: f.State, Limit: len(ids)})
		if err != nil {
			return SagaPage{}, sc.read, fmt.Errorf("wallet: list sagas: %w", err)
		}
		byID := make(map[int64]saga.Snapshot, len(snaps))
		for _, snap := range snaps {
			byID[snap.ID] = snap
		}
		for _, r := range rows {
			if snap, ok := byID[r.SagaID]; ok {
				found = append(found, r.operation(snap))
			}
		}
		if len(rows) < n {
			break
		}
		before = rows[len(rows)-1].SagaID
	}
	return pageOf(found, f.Limit), sc.read, nil
}

func validState(st saga.State) bool {
	switch st {
	case saga.Running, saga.Compensating, saga.Completed, saga.Compensated, saga.Failed, saga.NeedsAttention, saga.Resolved:
		return true
	}
	return false
}

// ListEvents returns a user's balance events in seq order. Errors: Invalid (bad filter),
// NotFound (no such user).
func (s *Service) ListEvents(ctx context.Context, userID int64, f EventFilter) ([]Event, error) {
	switch {
	case f.Limit == 0:
		f.Limit = DefaultEventPage
	case f.Limit < 1 || f.Limit > 1000:
		return nil, apperr.New(apperr.Invalid, "limit must be between 1 and 1000, got %d", f.Limit)
	}
	if f.AfterSeq < 0 {
		return nil, apperr.New(apperr.Invalid, "after must not be negative, got %d", f.AfterSeq)
	}
	if _, err := s.GetUser(ctx, userID); err != nil {
		return nil, err
	}
	return listEvents(ctx, s.pool, userID, f)
}
