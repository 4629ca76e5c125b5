package saga_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// --- helpers ---

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newEngine(t *testing.T, pool *pgxpool.Pool, opts saga.Options, defs ...saga.Definition) *saga.Engine {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	opts.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e := saga.New(pool, opts)
	for _, d := range defs {
		require.NoError(t, e.Register(d))
	}
	t.Cleanup(func() { require.NoError(t, e.Recovery().Stop(context.Background())) })
	return e
}

// runEngine runs e's recovery until the returned stop is called (at the latest, when the
// test ends).
func runEngine(t *testing.T, e *saga.Engine) (stop func()) {
	t.Helper()
	require.NoError(t, e.Recovery().Start(t.Context()))
	stop = func() { require.NoError(t, e.Recovery().Stop(context.Background())) }
	t.Cleanup(stop)
	return stop
}

// start commits a saga without driving it: what a runner that crashed right after its first
// commit leaves behind.
func start(t *testing.T, e *saga.Engine, kind string, input any) *saga.Started {
	t.Helper()
	s, err := e.Start(context.Background(), kind, input, nil)
	require.NoError(t, err)
	return s
}

// startAndDrive starts a saga and drives it inline, as a request does.
func startAndDrive(t *testing.T, e *saga.Engine, kind string) saga.Snapshot {
	t.Helper()
	s := start(t, e, kind, nil)
	snap, err := e.Drive(context.Background(), s)
	require.NoError(t, err)
	return snap
}

func waitSaga(t *testing.T, e *saga.Engine, id int64) saga.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := e.Wait(ctx, id)
	require.NoError(t, err, "saga %d: %+v", id, s)
	return s
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// effect is a local step that writes a row in the commit that records it. The effects
// table refuses the step name "refused" (a CHECK constraint), which refusals classifies as
// a definite failure.
func effect(step string) saga.LocalFunc {
	return func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
		b.Queue(`INSERT INTO effects (saga_id, step) VALUES ($1, $2)`, s.ID, step)
		return saga.Done()
	}
}

// refusals classifies the effects table's CHECK constraint as a definite failure.
func refusals(err error) (saga.Outcome, bool) {
	if pg.IsViolation(err, pgerrcode.CheckViolation, "effects_not_refused") {
		return saga.Fail("refused", errors.New("the effect was refused")), true
	}
	return saga.Outcome{}, false
}

func withEffects(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := testdb.New(t)
	exec(t, pool, `CREATE TABLE effects (saga_id bigint NOT NULL, step text NOT NULL CONSTRAINT effects_not_refused CHECK (step <> 'refused'))`)
	return pool
}

// keys records the idempotency keys a remote step was called with.
type keys struct {
	mu  sync.Mutex
	got []string
}

func (k *keys) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, key)
}

func (k *keys) list() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.got...)
}

func statuses(s saga.Snapshot) []string {
	var out []string
	for _, r := range s.Steps {
		out = append(out, fmt.Sprintf("%s/%s/%s/%d", r.Name, r.Phase, r.Status, r.Attempts))
	}
	return out
}

func fast(kind string, steps ...saga.Step) saga.Definition {
	return saga.Definition{Kind: kind, Steps: steps, Window: 300 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Classify: refusals}
}

// requireStored fails unless the database holds what the runner returned.
func requireStored(t *testing.T, e *saga.Engine, s saga.Snapshot) {
	t.Helper()
	got, err := e.Get(context.Background(), s.ID)
	require.NoError(t, err)
	require.Equal(t, got.State, s.State)
	require.Equal(t, got.KeyPrefix, s.KeyPrefix)
	require.Equal(t, got.Error, s.Error)
	require.Equal(t, statuses(got), statuses(s))
	if len(got.Data)+len(s.Data) > 0 {
		require.JSONEq(t, string(got.Data), string(s.Data))
	}
	require.True(t, got.UpdatedAt.Equal(s.UpdatedAt), "updated_at %s vs %s", got.UpdatedAt, s.UpdatedAt)
}

// --- tests ---

func TestHappyPathRunsInline(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var charged keys
	e := newEngine(t, pool, saga.Options{}, fast("order",
		saga.Step{Name: "reserve", Do: saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
			if err := s.SetData(map[string]string{"reservation": "r-1"}); err != nil {
				return saga.Fail("bad_data", err)
			}
			return effect("reserve")(s, b)
		})},
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, key string, s *saga.Instance) saga.Outcome {
			charged.add(key + " " + string(s.Data))
			return saga.Done()
		})},
		saga.Step{Name: "confirm", Do: saga.Local(effect("confirm"))},
	))
	// No recovery runs: the caller's goroutine does all of it.
	st := start(t, e, "order", map[string]int{"amount": 100})
	id := st.ID()
	require.Equal(t, saga.Running, st.Snapshot().State)
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/pending/1"}, statuses(st.Snapshot()), "the first commit ran the local step and counted the remote attempt")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, id))

	s, err := e.Drive(context.Background(), st)
	require.NoError(t, err)
	require.Equal(t, saga.Completed, s.State)
	require.Nil(t, s.Error)
	require.JSONEq(t, `{"amount": 100}`, string(s.Input))
	require.JSONEq(t, `{"reservation": "r-1"}`, string(s.Data))
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/done/1", "confirm/forward/done/1"}, statuses(s))
	require.Equal(t, []string{s.KeyPrefix + `:charge {"reservation":"r-1"}`}, charged.list())
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, id))
	requireStored(t, e, s)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sagas WHERE id = $1 AND lease_owner IS NULL`, id), "a terminal saga holds no lease")
}

func TestOnlyLocalStepsCommitOnce(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	e := newEngine(t, pool, saga.Options{}, fast("transfer",
		saga.Step{Name: "debit", Do: saga.Local(effect("debit")), Compensate: saga.Local(effect("reversal"))},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	st := start(t, e, "transfer", nil)
	s := st.Snapshot()
	require.Equal(t, saga.Completed, s.State, "Start ran every step")
	require.Equal(t, []string{"debit/forward/done/1", "credit/forward/done/1"}, statuses(s))
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects`))
	requireStored(t, e, s)
}

// A local step refused in the middle of a commit: the commit is planned again with that
// outcome, so the earlier step and its compensation both happen, in one transaction.
func TestRefusedLocalStepCompensatesInTheSameCommit(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	e := newEngine(t, pool, saga.Options{}, fast("transfer",
		saga.Step{Name: "debit", Do: saga.Local(effect("debit")), Compensate: saga.Local(effect("reversal"))},
		saga.Step{Name: "credit", Do: saga.Local(effect("refused"))},
	))
	s := start(t, e, "transfer", nil).Snapshot()
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "refused", Message: "the effect was refused"}, s.Error)
	require.Equal(t, []string{"debit/forward/done/1", "credit/forward/failed/1", "debit/compensate/done/1"}, statuses(s))
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE step IN ('debit', 'reversal')`))
	requireStored(t, e, s)
}

func TestFirstStepRefusedFailsAtOnce(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var called atomic.Bool
	e := newEngine(t, pool, saga.Options{}, fast("purchase",
		saga.Step{Name: "debit", Do: saga.Local(effect("refused")), Compensate: saga.Local(effect("refund"))},
		saga.Step{Name: "order", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			called.Store(true)
			return saga.Done()
		})},
	))
	s := start(t, e, "purchase", nil).Snapshot()
	require.Equal(t, saga.Failed, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "refused", Message: "the effect was refused"}, s.Error)
	require.Equal(t, []string{"debit/forward/failed/1"}, statuses(s))
	require.False(t, called.Load())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM effects`))
	requireStored(t, e, s)
}

// The caller's statements share the first commit: when one fails, Start returns its error
// and nothing is committed.
func TestStartJoinsCallersStatements(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	exec(t, pool, `CREATE TABLE owned (saga_id bigint PRIMARY KEY REFERENCES sagas (id), note text NOT NULL UNIQUE)`)
	e := newEngine(t, pool, saga.Options{}, fast("k", saga.Step{Name: "s", Do: saga.Local(effect("s"))}))
	ctx := context.Background()
	note := func(n string) saga.Queue {
		return func(id int64, b *pgx.Batch) { b.Queue(`INSERT INTO owned (saga_id, note) VALUES ($1, $2)`, id, n) }
	}
	first, err := e.Start(ctx, "k", nil, note("once"))
	require.NoError(t, err)
	require.Equal(t, saga.Completed, first.Snapshot().State)
	_, err = e.Start(ctx, "k", nil, note("once"))
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, "the caller's own error, as it is")
	require.Equal(t, pgerrcode.UniqueViolation, pe.Code)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sagas`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))

	_, err = e.Start(ctx, "nope", nil, nil)
	require.ErrorContains(t, err, `unknown kind "nope"`)
}

func TestRetryThenSuccessAfterBackoff(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var remoteCalls atomic.Int32
	def := fast("flaky",
		saga.Step{Name: "write", Do: saga.Local(effect("write"))},
		saga.Step{Name: "call", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			if remoteCalls.Add(1) < 3 {
				return saga.Retry(errors.New("503"))
			}
			return saga.Done()
		})},
	)
	def.Window = time.Minute
	e := newEngine(t, pool, saga.Options{}, def)
	s := startAndDrive(t, e, "flaky")
	require.Equal(t, saga.Running, s.State, "the inline run stops at its first backoff")
	require.Equal(t, []string{"write/forward/done/1", "call/forward/pending/1"}, statuses(s))
	require.Equal(t, "503", s.Steps[1].Error.Message)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sagas WHERE lease_owner IS NULL`), "no lease held in a backoff")

	runEngine(t, e) // recovery takes it from there
	s = waitSaga(t, e, s.ID)
	require.Equal(t, saga.Completed, s.State)
	require.Equal(t, []string{"write/forward/done/1", "call/forward/done/3"}, statuses(s))
	require.Nil(t, s.Steps[1].Error, "a step that succeeded shows no stale error")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
}

func TestExhaustedCompensatesInReverse(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var mu sync.Mutex
	var undone []string
	// Compensations record their keys, which name their steps.
	undo := saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
		mu.Lock()
		defer mu.Unlock()
		undone = append(undone, key)
		return saga.Done()
	})
	var tries atomic.Int32
	e := newEngine(t, pool, saga.Options{}, fast("transfer",
		saga.Step{Name: "a", Do: saga.Local(effect("a")), Compensate: undo},
		saga.Step{Name: "b", Do: saga.Local(effect("b")), Compensate: undo},
		saga.Step{Name: "c", Do: saga.Local(effect("c"))}, // nothing to undo
		saga.Step{Name: "d", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			tries.Add(1)
			return saga.Fail("merchant_down", errors.New("merchant down for good"))
		})},
	))
	s := startAndDrive(t, e, "transfer")
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "merchant_down", Message: "merchant down for good"}, s.Error)
	require.Equal(t, []string{
		"a/forward/done/1", "b/forward/done/1", "c/forward/done/1", "d/forward/failed/1",
		"c/compensate/skipped/0", "b/compensate/done/1", "a/compensate/done/1",
	}, statuses(s))
	requireStored(t, e, s)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{s.KeyPrefix + ":b:compensate", s.KeyPrefix + ":a:compensate"}, undone)
}

func TestCompensationFailureNeedsAttentionThenRetry(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var refundWorks atomic.Bool
	var refunds atomic.Int32
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Local(effect("charge")), Compensate: saga.Remote(
			func(context.Context, string, *saga.Instance) saga.Outcome {
				refunds.Add(1)
				if !refundWorks.Load() {
					return saga.Retry(errors.New("refund API down"))
				}
				return saga.Done()
			})},
		saga.Step{Name: "ship", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Fail("rejected", errors.New("merchant rejected the order"))
		})},
	))
	runEngine(t, e)
	id := startAndDrive(t, e, "deposit").ID
	s := waitSaga(t, e, id)
	require.Equal(t, saga.NeedsAttention, s.State)
	require.Equal(t, saga.CodeCompensationFailed, s.Error.Code)
	require.Contains(t, s.Error.Message, `compensation of step "charge" failed`)
	require.Contains(t, s.Error.Message, "refund API down")
	require.Contains(t, s.Error.Message, "rejected: merchant rejected the order")
	require.GreaterOrEqual(t, refunds.Load(), int32(2), "retried within its window, then it stops")

	refundWorks.Store(true)
	require.NoError(t, e.Retry(context.Background(), id))
	s = waitSaga(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "rejected", Message: "merchant rejected the order"}, s.Error)
	require.Equal(t, "charge/compensate/done", func() string { r := s.Steps[len(s.Steps)-1]; return r.Name + "/" + r.Phase + "/" + r.Status }())

	require.ErrorIs(t, e.Retry(context.Background(), id), saga.ErrNotRetryable)
	require.ErrorIs(t, e.Retry(context.Background(), id+1000), saga.ErrNotFound)
}

// A runner that died right after the first commit (its lease held, its call never made):
// recovery takes the saga over once the lease expires, with the same idempotency key.
func TestCrashAfterFirstCommitResumesFromRecovery(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var seen keys
	var calledAt atomic.Int64
	e := newEngine(t, pool, saga.Options{Owner: "survivor", Lease: 400 * time.Millisecond, PollInterval: 20 * time.Millisecond}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			calledAt.CompareAndSwap(0, time.Now().UnixNano())
			seen.add(key)
			return saga.Done()
		})},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	began := time.Now()
	st := start(t, e, "deposit", nil) // and never driven
	id, prefix := st.ID(), st.Snapshot().KeyPrefix
	require.Regexp(t, fmt.Sprintf(`^%d-[0-9a-f]{32}$`, id), prefix, "the saga id and the nonce Start minted")
	runEngine(t, e)

	s := waitSaga(t, e, id)
	require.Equal(t, saga.Completed, s.State)
	require.GreaterOrEqual(t, calledAt.Load(), began.Add(400*time.Millisecond).UnixNano(), "not before the lease expired")
	require.Equal(t, []string{prefix + ":charge"}, seen.list(), "the key Start's nonce made, read back by recovery")
	require.Equal(t, prefix, s.KeyPrefix)
	require.Equal(t, []string{"charge/forward/done/2", "credit/forward/done/1"}, statuses(s), "the lost attempt counts")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
}

// A runner whose remote call outlives its lease: recovery takes the saga over and finishes
// it; the first runner's late success is refused by the fence and applies nothing.
func TestStolenLeaseDoesNotApplyTwice(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var calls atomic.Int32
	release := make(chan struct{})
	e := newEngine(t, pool, saga.Options{Owner: "slow", Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, _ string, _ *saga.Instance) saga.Outcome {
			if calls.Add(1) == 1 {
				<-release // the first runner's call hangs past its lease
			}
			return saga.Done()
		})},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	def := fast("deposit", saga.Step{Name: "charge", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
		calls.Add(1)
		return saga.Done()
	})}, saga.Step{Name: "credit", Do: saga.Local(effect("credit"))})
	thief := newEngine(t, pool, saga.Options{Owner: "thief", Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond}, def)

	st := start(t, e, "deposit", nil)
	driven := make(chan error, 1)
	go func() {
		_, err := e.Drive(context.Background(), st)
		driven <- err
	}()
	runEngine(t, thief)
	s := waitSaga(t, thief, st.ID())
	require.Equal(t, saga.Completed, s.State)
	close(release)
	err := <-driven
	require.Error(t, err, "the late commit was refused")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`), "credited once")
	require.Equal(t, []string{"charge/forward/done/2", "credit/forward/done/1"}, statuses(waitSaga(t, e, st.ID())))
}

func TestLocalStepsExactlyOnceWithTwoEngines(t *testing.T) {
	t.Parallel()
	pool, url := testdb.New(t)
	exec(t, pool, `CREATE TABLE effects (saga_id bigint NOT NULL, step text NOT NULL)`) // no UNIQUE: duplicates must show
	pool2, err := pgxpool.New(context.Background(), url)                                // a second "process"
	require.NoError(t, err)
	t.Cleanup(pool2.Close)

	const n = 200
	var worked [2]atomic.Int32
	def := func(engine int) saga.Definition {
		d := fast("busy",
			saga.Step{Name: "debit", Do: saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
				worked[engine].Add(1)
				return effect("debit")(s, b)
			})},
			saga.Step{Name: "notify", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
				if rand.IntN(3) == 0 {
					return saga.Retry(errors.New("try again")) // leaves the saga to recovery
				}
				return saga.Done()
			})},
			saga.Step{Name: "credit", Do: saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
				worked[engine].Add(1)
				return effect("credit")(s, b)
			})},
		)
		d.Window = time.Minute
		return d
	}
	e1 := newEngine(t, pool, saga.Options{Owner: "one", Lease: 150 * time.Millisecond}, def(0))
	e2 := newEngine(t, pool2, saga.Options{Owner: "two", Lease: 150 * time.Millisecond}, def(1))
	runEngine(t, e1)
	runEngine(t, e2)

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := []*saga.Engine{e1, e2}[i%2]
			st, err := e.Start(context.Background(), "busy", nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if i%5 == 0 {
				return // "crashed" after the first commit
			}
			_, _ = e.Drive(context.Background(), st)
		})
	}
	wg.Wait()
	wait.Until(t, 25*time.Second, "every saga to complete", func() bool {
		return count(t, pool, `SELECT count(*) FROM sagas WHERE state = 'completed'`) >= n
	})
	require.Equal(t, n, count(t, pool, `SELECT count(*) FROM sagas`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(DISTINCT (saga_id, step)) FROM effects`))
	require.Positive(t, worked[0].Load(), "engine one worked")
	require.Positive(t, worked[1].Load(), "engine two worked")
}

func TestWait(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	release := make(chan struct{})
	def := fast("slow", saga.Step{Name: "wait",
		Do: saga.Remote(func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
			select {
			case <-release:
				return saga.Done()
			case <-ctx.Done():
				return saga.Retry(ctx.Err())
			}
		})})
	def.AttemptTimeout = 20 * time.Second
	e := newEngine(t, pool, saga.Options{PollInterval: time.Hour}, def)
	st := start(t, e, "slow", nil)
	id := st.ID()
	e.Go(st)

	// The saga is held until release, so Wait ends by this deadline, after its first read:
	// 2 s, where 100 ms once let a loaded machine's first read itself run out of time (Wait
	// then has no snapshot to give, as documented).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	s, err := e.Wait(ctx, id)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, id, s.ID, "the latest snapshot comes with the error")
	require.Equal(t, saga.Running, s.State)

	type result struct {
		s   saga.Snapshot
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := e.Wait(context.Background(), id)
		done <- result{s, err}
	}()
	close(release)
	select {
	case r := <-done: // PollInterval is an hour: only the runner's wake-up can have woken it
		require.NoError(t, r.err)
		require.Equal(t, saga.Completed, r.s.State)
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the saga completed")
	}

	_, err = e.Wait(context.Background(), id+1000)
	require.ErrorIs(t, err, saga.ErrNotFound)
	_, err = e.Get(context.Background(), id+1000)
	require.ErrorIs(t, err, saga.ErrNotFound)
}

func TestRegisterValidates(t *testing.T) {
	t.Parallel()
	ok := saga.Local(func(*saga.Instance, *pgx.Batch) saga.Outcome { return saga.Done() })
	remote := saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome { return saga.Done() })
	both := saga.Action{Local: ok.Local, Remote: remote.Remote}
	tests := []struct {
		name string
		def  saga.Definition
		want string
	}{
		{"empty kind", saga.Definition{Steps: []saga.Step{{Name: "a", Do: ok}}}, "empty kind"},
		{"no steps", saga.Definition{Kind: "k"}, "no steps"},
		{"unnamed step", saga.Definition{Kind: "k", Steps: []saga.Step{{Do: ok}}}, "step 0 has no name"},
		{"duplicate step", saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a", Do: ok}, {Name: "a", Do: ok}}}, `duplicate step name "a"`},
		{"no action", saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a"}}}, "exactly one of Local and Remote"},
		{"two actions", saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a", Do: both}}}, "exactly one of Local and Remote"},
		{"two compensations", saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a", Do: ok, Compensate: both}}}, "Compensate has both"},
		{"negative window", saga.Definition{Kind: "k", Window: -1, Steps: []saga.Step{{Name: "a", Do: ok}}}, "negative"},
		{"timeout beyond the lease", saga.Definition{Kind: "k", AttemptTimeout: time.Minute, Steps: []saga.Step{{Name: "a", Do: ok}}}, "shorter than the lease"},
	}
	e := saga.New(nil, saga.Options{})
	for _, tt := range tests {
		require.ErrorContains(t, e.Register(tt.def), tt.want, tt.name)
	}
	good := saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a", Do: ok, Compensate: remote}, {Name: "b", Do: remote}}}
	require.NoError(t, e.Register(good))
	require.ErrorContains(t, e.Register(good), "already registered")
}

// A run is bounded as a whole: a remote party that answers each attempt just inside its
// timeout, again and again, cannot keep a request's run (and the request) going for longer
// than RunTimeout. The saga is left to recovery, which asks again with the same key.
func TestARunIsBoundedByRunTimeout(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	slow := func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
		select {
		case <-ctx.Done():
			return saga.Retry(ctx.Err())
		case <-time.After(2 * time.Second):
			return saga.Done()
		}
	}
	d := saga.Definition{Kind: "bounded", AttemptTimeout: 5 * time.Second, Window: time.Minute,
		Steps: []saga.Step{{Name: "a", Do: saga.Remote(slow)}, {Name: "b", Do: saga.Remote(slow)}, {Name: "c", Do: saga.Remote(slow)}}}
	e := newEngine(t, pool, saga.Options{RunTimeout: 300 * time.Millisecond, Lease: 10 * time.Second}, d)
	s := start(t, e, "bounded", nil)
	began := time.Now()
	snap, err := e.Drive(context.Background(), s)
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, 2*time.Second, "the run stopped at its bound, not at the end of an attempt")
	require.Equal(t, saga.Running, snap.State, "left running, for recovery")
}

// TestAfterCommitRunsOnlyForTheCommitThatHeld: a local step's AfterCommit runs once its
// commit is done, never for a commit that was rolled back (the refused credit took the
// debit of the same batch with it; the debit's and its reversal's next commit held).
func TestAfterCommitRunsOnlyForTheCommitThatHeld(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var (
		mu  sync.Mutex
		ran []string
	)
	noted := func(step string) saga.LocalFunc {
		return func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
			s.AfterCommit(func() {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, step)
			})
			return effect(step)(s, b)
		}
	}
	e := newEngine(t, pool, saga.Options{}, fast("transfer",
		saga.Step{Name: "debit", Do: saga.Local(noted("debit")), Compensate: saga.Local(noted("reversal"))},
		saga.Step{Name: "credit", Do: saga.Local(noted("refused"))},
	))
	s := start(t, e, "transfer", nil).Snapshot()
	require.Equal(t, saga.Compensated, s.State)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"debit", "reversal"}, ran)
}
