package saga

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means there is no saga with that id.
var ErrNotFound = errors.New("saga: not found")

// ErrNotRetryable means Retry or Resolve was asked for a saga that is not in NeedsAttention.
var ErrNotRetryable = errors.New("saga: not in needs_attention")

// Options tune an Engine. Zero values take the defaults.
type Options struct {
	Owner        string        // lease owner id; default hostname:pid:random
	Lease        time.Duration // default 30s; a runner extends it while working on a saga
	PollInterval time.Duration // fallback poll when no notification arrives, for runners and Waits; default 1s
	Workers      int           // sagas worked on concurrently by this engine; default 8
	Logger       *slog.Logger  // default slog.Default()
	Observer     StepObserver  // told about every step attempt; none when nil
}

// Engine starts sagas and runs them. Several engines, in one process or many, may share a
// database: they divide the due sagas between them with leases.
type Engine struct {
	pool    *pgxpool.Pool
	opts    Options
	log     *slog.Logger
	running atomic.Bool

	mu   sync.Mutex
	defs map[string]*Definition
	held map[int64]bool // sagas this engine's runners are working on
	dues []time.Time    // when sagas this engine left in backoff become due

	wake chan struct{}
	lis  *listener
}

// New returns an engine on pool. Register the definitions, then call Run.
func New(pool *pgxpool.Pool, opts Options) *Engine {
	if opts.Owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		opts.Owner = host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b)
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{
		pool: pool, opts: opts, log: opts.Logger.With("component", "saga", "owner", opts.Owner),
		defs: map[string]*Definition{}, held: map[int64]bool{}, wake: make(chan struct{}, 1),
	}
	e.lis = newListener(e)
	return e
}

// Register adds a kind of saga. It fails if the kind is taken, there are no steps, step
// names repeat or are empty, or an action does not set exactly one of Local and Remote
// (a compensation may set neither: nothing to undo).
func (e *Engine) Register(d Definition) error {
	if err := validate(&d); err != nil {
		return fmt.Errorf("saga: register %q: %w", d.Kind, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.defs[d.Kind]; dup {
		return fmt.Errorf("saga: register %q: kind already registered", d.Kind)
	}
	e.defs[d.Kind] = &d
	return nil
}

func (e *Engine) definition(kind string) *Definition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.defs[kind]
}

// Start creates a saga of a registered kind with input (encoded as JSON) in the caller's
// transaction, so the caller's own rows commit or roll back with it. Runners in every
// process are woken when tx commits. It returns the saga's id.
func (e *Engine) Start(ctx context.Context, tx pgx.Tx, kind string, input any) (int64, error) {
	if e.definition(kind) == nil {
		return 0, fmt.Errorf("saga: start: unknown kind %q", kind)
	}
	b, err := json.Marshal(input)
	if err != nil {
		return 0, fmt.Errorf("saga: start %q: input: %w", kind, err)
	}
	return insertSaga(ctx, tx, kind, b)
}

// Get returns a saga and its step history, or ErrNotFound.
func (e *Engine) Get(ctx context.Context, id int64) (Snapshot, error) {
	return snapshot(ctx, e.pool, id)
}

// Wait returns the saga once it is in a terminal state. When ctx ends first it returns the
// latest snapshot and ctx's error; a missing saga gives ErrNotFound.
//
// Waits take no connection of their own: they share the engine's one listening connection
// (outside the pool), which is opened by the first Wait or by Run and closed once Run has
// returned and no Wait is in progress. A Wait is woken by its saga's saga_done notification
// or, should that be lost (the connection dropped), by a re-check of every waited saga each
// PollInterval. Each wake-up reads the saga once through the pool.
func (e *Engine) Wait(ctx context.Context, id int64) (Snapshot, error) {
	wake, unsubscribe := e.lis.subscribe(id) // before the first read: no notification is missed
	defer unsubscribe()
	var last Snapshot
	for {
		s, err := e.Get(ctx, id)
		switch {
		case err == nil:
			last = s
			if s.State.Terminal() {
				return s, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case errors.Is(err, ErrNotFound):
			return s, err
		}
		// A failed read is retried at the next wake-up; the re-check guarantees one.
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-wake:
		}
	}
}

// Retry sends a saga in NeedsAttention (a compensation failed) back to compensating, with
// fresh attempts for the compensation that failed. It returns ErrNotFound or
// ErrNotRetryable.
func (e *Engine) Retry(ctx context.Context, id int64) error {
	return withTx(ctx, e.pool, func(tx pgx.Tx) error { return retrySaga(ctx, tx, id) })
}

// RetryTx is Retry in the caller's transaction (e.g. with an audit row); runners are woken
// when tx commits. It returns ErrNotFound or ErrNotRetryable.
func (e *Engine) RetryTx(ctx context.Context, tx pgx.Tx, id int64) error {
	return retrySaga(ctx, tx, id)
}

// ResolveTx marks a saga in NeedsAttention Resolved in the caller's transaction: an operator
// settled what the failed compensation left by hand, and the engine must not touch it
// again. The saga keeps its error and history. It returns ErrNotFound or ErrNotRetryable.
func (e *Engine) ResolveTx(ctx context.Context, tx pgx.Tx, id int64) error {
	return resolveSaga(ctx, tx, id)
}

// CountByKindState counts the sagas by kind and state (for metrics).
func (e *Engine) CountByKindState(ctx context.Context) ([]KindStateCount, error) {
	return countSagas(ctx, e.pool)
}

// Run claims due sagas and works on them until ctx is done; it returns nil after every
// attempt in flight has ended (a cancelled attempt is abandoned and re-run later with the
// same idempotency key) and, unless a Wait is still in progress, the engine's listening
// connection has closed. There is no separate Close: stopping Run (and letting the Waits
// return) releases everything the engine holds.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("saga: engine already running")
	}
	defer e.running.Store(false)
	e.lis.acquire() // wakes the dispatcher on saga_due
	defer func() {
		if stopped := e.lis.release(); stopped != nil {
			<-stopped
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()

	for ctx.Err() == nil {
		kinds, held, free := e.claimable()
		if free > 0 && len(kinds) > 0 {
			ids, err := claimSagas(ctx, e.pool, e.opts.Owner, e.opts.Lease, kinds, held, free)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("saga: claim failed", "err", err)
			}
			for _, id := range ids {
				e.mu.Lock()
				e.held[id] = true
				e.mu.Unlock()
				wg.Go(func() {
					e.work(ctx, id)
					e.mu.Lock()
					delete(e.held, id)
					e.mu.Unlock()
					e.signal()
				})
			}
			if err == nil && len(ids) == free {
				continue // more may be due; wait for a free runner
			}
		}
		t := time.NewTimer(e.nextWait())
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// claimable returns the registered kinds, the sagas already held, and how many more this
// engine may take on; it also forgets due times that have passed.
func (e *Engine) claimable() (kinds []string, held []int64, free int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.defs {
		kinds = append(kinds, k)
	}
	held = make([]int64, 0, len(e.held)) // not nil: NULL would match no row in "id <> ALL($4)"
	for id := range e.held {
		held = append(held, id)
	}
	now := time.Now()
	e.dues = slices.DeleteFunc(e.dues, func(t time.Time) bool { return !t.After(now) })
	return kinds, held, e.opts.Workers - len(e.held)
}

// nextWait is how long the dispatcher may sleep: until the earliest saga left in backoff
// is due, at most PollInterval.
func (e *Engine) nextWait() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.opts.PollInterval
	for _, t := range e.dues {
		d = min(d, time.Until(t))
	}
	return max(d, time.Millisecond)
}

// noteDue remembers that a saga this engine left becomes due at t.
func (e *Engine) noteDue(t time.Time) {
	e.mu.Lock()
	e.dues = append(e.dues, t)
	e.mu.Unlock()
	e.signal()
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}
