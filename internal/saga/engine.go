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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// ErrNotFound means there is no saga with that id.
var ErrNotFound = errors.New("saga: not found")

// ErrNotRetryable means Retry or Resolve was asked for a saga that is not in NeedsAttention.
var ErrNotRetryable = errors.New("saga: not in needs_attention")

// Options tune an Engine. Zero values take the defaults.
type Options struct {
	Owner string // lease owner id; default hostname:pid:random
	// Lease is how long a runner may hold a saga between two commits before a recovery
	// runner may take it over (default 30s). It must exceed every AttemptTimeout.
	Lease time.Duration
	// PollInterval is how often recovery looks for due sagas and Waits re-check their
	// sagas, when nothing in this process woke them sooner (default 1s).
	PollInterval time.Duration
	Workers      int          // sagas recovered concurrently by this engine; default 8
	Logger       *slog.Logger // default slog.Default()
	Observer     StepObserver // told about every step attempt; none when nil
	// RunTimeout bounds one run of a saga (a request's Drive, a Go, a recovery run) from its
	// start to its end or first backoff (default 2m). A run that a stalled peer keeps past
	// it is abandoned: its attempt in flight is dropped and recovery asks again with the
	// same key once the lease expires. Every attempt is bounded by its AttemptTimeout and
	// every commit by the database's statement timeout already; this bounds their sum.
	RunTimeout time.Duration
	// CommitGroups is how many groups of saga commits are written at once (default 2, and
	// at most half the pool's connections): a commit that finds one of them free is written
	// at once, alone; the others queue and share the next group's transaction (see
	// commitgroup.go). Two keep Postgres busy while one group waits for its WAL flush; more
	// only cut the queue into smaller groups that each pay a flush.
	CommitGroups int
	// CommitGroupSize is the most commits one group holds (default 64).
	CommitGroupSize int
}

// Engine starts sagas, runs them inline, and recovers those nobody runs. Several engines, in
// one process or many, may share a database: leases and fences keep each saga with one
// runner at a time.
type Engine struct {
	pool     *pgxpool.Pool
	opts     Options
	log      *slog.Logger
	recovery *Recovery

	mu   sync.Mutex
	defs map[string]*Definition
	held map[int64]bool // sagas this engine's recovery runners are working on
	dues []time.Time    // when sagas this engine left in backoff become due
	ids  []int64        // saga ids allocated and not used yet

	// Background runs (Go) live until the recovery stops; bg is their context.
	bg     context.Context
	stopBG context.CancelFunc
	bgWG   sync.WaitGroup

	wake    chan struct{}
	waiters *waiters
	commits *committer
}

// New returns an engine on pool. Register the definitions, then start its Recovery.
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
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CommitGroups <= 0 {
		opts.CommitGroups = 2
		if pool != nil {
			opts.CommitGroups = int(min(2, max(1, pool.Config().MaxConns/2)))
		}
	}
	if opts.CommitGroupSize <= 0 {
		opts.CommitGroupSize = 64
	}
	bg, stop := context.WithCancel(context.Background())
	e := &Engine{
		pool: pool, opts: opts, log: opts.Logger.With("component", "saga", "owner", opts.Owner),
		defs: map[string]*Definition{}, held: map[int64]bool{}, wake: make(chan struct{}, 1),
		bg: bg, stopBG: stop,
	}
	e.waiters = newWaiters(e)
	e.commits = newCommitter(pool, opts.CommitGroups, opts.CommitGroupSize)
	e.recovery = &Recovery{Runner: lifecycle.NewRunner(e.recoverSagas), e: e}
	return e
}

// Recovery is the engine's background work. Start begins recovering sagas nobody runs: it
// claims, in batches, sagas whose backoff is due or whose lease expired (their runner died
// or gave up), and drives each; it polls every PollInterval, sooner when a run in this
// process leaves a saga in backoff. Stop first stops the runs Go started, then recovery, and
// returns once every run has ended (an attempt in flight is abandoned and re-run later with
// the same idempotency key).
type Recovery struct {
	// Runner recovers in the background between Start and Stop.
	*lifecycle.Runner
	e *Engine
}

// Recovery returns the engine's background work, to start once the definitions are
// registered.
func (e *Engine) Recovery() *Recovery { return e.recovery }

// Stop stops the runs Go started, then recovery, and waits for them (until ctx ends).
func (r *Recovery) Stop(ctx context.Context) error {
	r.e.stopBG()
	done := make(chan struct{})
	go func() { r.e.bgWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("saga: background runs still running at shutdown: %w", ctx.Err())
	}
	return r.Runner.Stop(ctx)
}

// Register adds a kind of saga. It fails if the kind is taken, there are no steps, step
// names repeat or are empty, or an action does not set exactly one of Local and Remote
// (a compensation may set neither: nothing to undo).
func (e *Engine) Register(d Definition) error {
	if err := validate(&d); err != nil {
		return fmt.Errorf("saga: register %q: %w", d.Kind, err)
	}
	if d.AttemptTimeout >= e.opts.Lease {
		return fmt.Errorf("saga: register %q: AttemptTimeout %s must be shorter than the lease %s", d.Kind, d.AttemptTimeout, e.opts.Lease)
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

// idBlock is how many saga ids one round trip allocates.
const idBlock = 64

// nextID returns an unused saga id, allocating a block of them when none is left.
func (e *Engine) nextID(ctx context.Context) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ids) == 0 {
		ids, err := allocateIDs(ctx, e.pool, idBlock)
		if err != nil {
			return 0, err
		}
		e.ids = ids
	}
	id := e.ids[0]
	e.ids = e.ids[1:]
	return id, nil
}

// Queue adds the caller's own statements to a saga's first commit: they run after the saga's
// row is inserted (so they may refer to id), before its local steps. An error of theirs
// fails Start with that error and commits nothing.
type Queue func(id int64, b *pgx.Batch)

// Started is a saga that Start committed and that the caller holds: Drive or Go runs it.
type Started struct {
	run *runner
}

// ID is the saga's id.
func (s *Started) ID() int64 { return s.run.id }

// Snapshot is the saga as its latest commit left it, with the history written since Start.
func (s *Started) Snapshot() Snapshot { return s.run.snapshot() }

// Start creates a saga of a registered kind with input (encoded as JSON), in one commit (one
// round trip) with the caller's statements (queue, may be nil) and every local step before
// the first remote one, holding the saga's lease. Errors of the caller's statements are
// returned as they are; nothing is committed then. A saga made only of local steps is
// terminal when Start returns.
func (e *Engine) Start(ctx context.Context, kind string, input any, queue Queue) (*Started, error) {
	d := e.definition(kind)
	if d == nil {
		return nil, fmt.Errorf("saga: start: unknown kind %q", kind)
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("saga: start %q: input: %w", kind, err)
	}
	id, err := e.nextID(ctx)
	if err != nil {
		return nil, err
	}
	nonce := newNonce()
	ctx, span := tracer.Start(ctx, "saga.start")
	r := &runner{e: e, d: d, id: id, kind: kind, input: in, fence: 1, inline: true, nonce: nonce, keyPrefix: keyPrefix(id, nonce),
		at:          position{State: Running, Step: 0, Phase: phaseForward, Attempts: 1},
		traceparent: telemetry.Traceparent(ctx), span: span.SpanContext()}
	if span.IsRecording() {
		span.SetAttributes(r.attrs()...)
	}
	err = r.commit(ctx, nil, queue)
	endWithError(span, err)
	if err != nil {
		return nil, err
	}
	return &Started{run: r}, nil
}

// newNonce mints a saga's nonce: 128 random bits, stored with it (sagas.key_nonce).
func newNonce() pgtype.UUID {
	n := pgtype.UUID{Valid: true}
	_, _ = rand.Read(n.Bytes[:]) // never fails (crypto/rand)
	return n
}

// keyPrefix is the KeyPrefix of saga id with nonce (see StepKey): "<id>-<nonce in hex>", or
// "<id>" for a saga created before the nonce existed (NULL), so that it keeps the keys it
// may have sent already.
func keyPrefix(id int64, nonce pgtype.UUID) string {
	p := strconv.FormatInt(id, 10)
	if !nonce.Valid {
		return p
	}
	return p + "-" + hex.EncodeToString(nonce.Bytes[:])
}

// Drive runs a started saga in the caller's goroutine until it ends, waits in a backoff (the
// recovery runners take it from there), or ctx is done, and returns it as its latest commit
// left it. It reads nothing back: the snapshot is built from what the commits returned. An
// error means the saga could not be recorded further (a database failure, or another runner
// took it over); it is then recovered once its lease expires.
func (e *Engine) Drive(ctx context.Context, s *Started) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.RunTimeout)
	defer cancel()
	err := s.run.drive(ctx)
	return s.run.snapshot(), err
}

// Go drives a started saga in the background, until it ends or waits in a backoff, or the
// engine's Recovery is stopped.
func (e *Engine) Go(s *Started) {
	e.bgWG.Go(func() {
		ctx, cancel := context.WithTimeout(e.bg, e.opts.RunTimeout)
		defer cancel()
		if err := s.run.drive(ctx); err != nil && e.bg.Err() == nil && !errors.Is(err, errMoved) {
			e.log.Warn("saga: background run stopped; recovery will resume it", "saga", s.ID(), "err", err)
		}
	})
}

// Get returns a saga and its step history, or ErrNotFound.
func (e *Engine) Get(ctx context.Context, id int64) (Snapshot, error) {
	return snapshot(ctx, e.pool, id)
}

// ListFilter selects sagas for List. Zero fields select everything.
type ListFilter struct {
	// IDs, when not nil, are the only sagas to consider (an empty, non-nil list selects none).
	IDs []int64
	// Kinds, when not empty, are the only kinds to consider.
	Kinds []string
	// State, when not empty, is the only state to consider.
	State State
	// Before, when positive, selects only sagas with a smaller id.
	Before int64
	// Limit is the most sagas to return (1–1000).
	Limit int
}

// List returns the sagas f selects, newest (highest id) first, without their input, data
// and step history (Get has them). It is how other packages read saga state: they never
// read the engine's tables themselves.
func (e *Engine) List(ctx context.Context, f ListFilter) ([]Snapshot, error) {
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, fmt.Errorf("saga: list: limit must be between 1 and 1000, got %d", f.Limit)
	}
	if f.IDs != nil && len(f.IDs) == 0 {
		return nil, nil
	}
	return listSagas(ctx, e.pool, f)
}

// Wait returns the saga once it is in a terminal state. When ctx ends first it returns the
// latest snapshot it read (a zero Snapshot if ctx ended before the first read did) and ctx's
// error; a missing saga gives ErrNotFound.
//
// A Wait is woken at once when a runner of this engine ends the saga, and otherwise by a
// re-check, every PollInterval, of all the sagas waited for, in one query. Each wake-up
// reads the saga once.
func (e *Engine) Wait(ctx context.Context, id int64) (Snapshot, error) {
	wake, unsubscribe := e.waiters.subscribe(id) // before the first read: no wake-up is missed
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
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-wake:
		}
	}
}

// Retry sends a saga in NeedsAttention (a compensation failed) back to compensating, with a
// fresh window for the compensation that failed. It returns ErrNotFound or ErrNotRetryable.
func (e *Engine) Retry(ctx context.Context, id int64) error {
	err := pg.WithTx(ctx, e.pool, func(tx pgx.Tx) error { return retrySaga(ctx, tx, id) })
	e.signal()
	return err
}

// RetryTx is Retry in the caller's transaction (e.g. with an audit row); the recovery
// runners find it due at their next poll. It returns ErrNotFound or ErrNotRetryable.
func (e *Engine) RetryTx(ctx context.Context, tx pgx.Tx, id int64) error {
	return retrySaga(ctx, tx, id)
}

// ResolveTx marks a saga in NeedsAttention Resolved in the caller's transaction: an operator
// settled what the failed compensation left by hand, and the engine must not touch it
// again. The saga keeps its error and history. It returns ErrNotFound or ErrNotRetryable.
func (e *Engine) ResolveTx(ctx context.Context, tx pgx.Tx, id int64) error {
	return resolveSaga(ctx, tx, id)
}

// Pruned is told, in the transaction that deletes them, the ids of the sagas a Prune
// deletes, so that the caller's rows about them change in the same commit (the wallet marks
// its operation rows). An error rolls the whole batch back: no saga is deleted.
type Pruned func(ctx context.Context, tx pgx.Tx, ids []int64) error

// Prune deletes up to limit sagas that finished (completed, compensated, failed or
// resolved) more than window ago, with their history, and returns how many it deleted. A
// saga that runs, compensates or waits for an operator is never deleted. It skips sagas
// others hold locked, so several replicas may prune at once. pruned, when not nil, is told
// the deleted ids in the same transaction.
func (e *Engine) Prune(ctx context.Context, window time.Duration, limit int, pruned Pruned) (int64, error) {
	return pruneFinished(ctx, e.pool, window, limit, pruned)
}

// OldestFinished returns how long ago the oldest finished saga still kept finished.
func (e *Engine) OldestFinished(ctx context.Context) (time.Duration, error) {
	return oldestFinished(ctx, e.pool)
}

// CountByKindState counts the sagas by kind and state (for metrics).
func (e *Engine) CountByKindState(ctx context.Context) ([]KindStateCount, error) {
	return countSagas(ctx, e.pool)
}

// recoverSagas recovers sagas until ctx is done (see Recovery), and returns once every recovery
// run has ended.
func (e *Engine) recoverSagas(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()

	for ctx.Err() == nil {
		kinds, held, free := e.claimable()
		if free > 0 && len(kinds) > 0 {
			got, err := claimSagas(ctx, e.pool, e.opts.Owner, e.opts.Lease, kinds, held, free)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("saga: claim failed", "err", err)
			}
			for _, c := range got {
				d := e.definition(c.Kind)
				r := &runner{e: e, d: d, id: c.ID, kind: c.Kind, input: c.Input, data: c.Data, fence: c.Fence,
					nonce: c.Nonce, keyPrefix: keyPrefix(c.ID, c.Nonce),
					at: c.position, stepSince: c.StepSince, err: c.Err, traceparent: c.Traceparent, steps: c.History}
				e.mu.Lock()
				e.held[c.ID] = true
				e.mu.Unlock()
				wg.Go(func() {
					rctx, cancel := context.WithTimeout(ctx, e.opts.RunTimeout)
					defer cancel()
					if err := r.drive(rctx); err != nil && ctx.Err() == nil && !errors.Is(err, errMoved) {
						e.log.Warn("saga: recovery run stopped; will retry", "saga", r.id, "err", err)
					}
					e.mu.Lock()
					delete(e.held, r.id)
					e.mu.Unlock()
					e.signal()
				})
			}
			if err == nil && len(got) == free {
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

// nextWait is how long recovery may sleep: until the earliest saga left in backoff here is
// due, at most PollInterval.
func (e *Engine) nextWait() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.opts.PollInterval
	for _, t := range e.dues {
		d = min(d, time.Until(t))
	}
	return max(d, time.Millisecond)
}

// noteDue remembers that a saga a run of this process left becomes due at t.
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
