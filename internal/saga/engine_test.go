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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testdb"
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
	return e
}

// runEngine runs e until the returned stop is called (at the latest, when the test ends).
func runEngine(t *testing.T, e *saga.Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

func start(t *testing.T, pool *pgxpool.Pool, e *saga.Engine, kind string, input any) int64 {
	t.Helper()
	var id int64
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		id, err = e.Start(context.Background(), tx, kind, input)
		return err
	})
	require.NoError(t, err)
	return id
}

func wait(t *testing.T, e *saga.Engine, id int64) saga.Snapshot {
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

// effect is a local step that writes a row in the step's transaction.
func effect(step string) saga.LocalFunc {
	return func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
		if _, err := tx.Exec(ctx, `INSERT INTO effects (saga_id, step) VALUES ($1, $2)`, s.ID, step); err != nil {
			return saga.Retry(err)
		}
		return saga.Done()
	}
}

func withEffects(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := testdb.New(t)
	exec(t, pool, `CREATE TABLE effects (saga_id bigint NOT NULL, step text NOT NULL)`)
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
	return saga.Definition{Kind: kind, Steps: steps, MaxAttempts: 3, AttemptTimeout: 5 * time.Second,
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond}
}

// --- tests ---

func TestHappyPath(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var charged keys
	e := newEngine(t, pool, saga.Options{}, fast("order",
		saga.Step{Name: "reserve", Do: saga.Local(func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
			if o := effect("reserve")(ctx, tx, s); o.Kind != saga.OutcomeDone {
				return o
			}
			if err := s.SetData(map[string]string{"reservation": "r-1"}); err != nil {
				return saga.Fail("bad_data", err)
			}
			return saga.Done()
		})},
		saga.Step{Name: "charge", Do: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
			charged.add(key + " " + string(s.Data))
			return saga.Done()
		})},
		saga.Step{Name: "confirm", Do: saga.Local(effect("confirm"))},
	))
	runEngine(t, e)

	id := start(t, pool, e, "order", map[string]int{"amount": 100})
	s := wait(t, e, id)
	require.Equal(t, saga.Completed, s.State)
	require.Nil(t, s.Error)
	require.JSONEq(t, `{"amount": 100}`, string(s.Input))
	require.JSONEq(t, `{"reservation": "r-1"}`, string(s.Data))
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/done/1", "confirm/forward/done/1"}, statuses(s))
	require.Equal(t, []string{fmt.Sprintf(`%d:charge {"reservation": "r-1"}`, id)}, charged.list())
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, id))
}

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var remoteCalls, localCalls atomic.Int32
	e := newEngine(t, pool, saga.Options{}, fast("flaky",
		saga.Step{Name: "write", Do: saga.Local(func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
			o := effect("write")(ctx, tx, s)
			if localCalls.Add(1) == 1 {
				return saga.RetryAfter(errors.New("lock timeout"), 2*time.Millisecond) // its row must roll back
			}
			return o
		})},
		saga.Step{Name: "call", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			if remoteCalls.Add(1) < 3 {
				return saga.Retry(errors.New("503"))
			}
			return saga.Done()
		})},
	))
	runEngine(t, e)

	s := wait(t, e, start(t, pool, e, "flaky", nil))
	require.Equal(t, saga.Completed, s.State)
	require.Equal(t, []string{"write/forward/done/2", "call/forward/done/3"}, statuses(s))
	require.Nil(t, s.Steps[1].Error, "a step that succeeded shows no stale error")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
}

func TestExhaustedCompensatesInReverse(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var mu sync.Mutex
	var undone []string
	undo := func(name string) saga.Action {
		return saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			mu.Lock()
			defer mu.Unlock()
			undone = append(undone, key)
			return saga.Done()
		})
	}
	e := newEngine(t, pool, saga.Options{}, fast("transfer",
		saga.Step{Name: "a", Do: saga.Local(effect("a")), Compensate: undo("a")},
		saga.Step{Name: "b", Do: saga.Local(effect("b")), Compensate: undo("b")},
		saga.Step{Name: "c", Do: saga.Local(effect("c"))}, // nothing to undo
		saga.Step{Name: "d", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Retry(errors.New("merchant down"))
		})},
	))
	runEngine(t, e)

	id := start(t, pool, e, "transfer", nil)
	s := wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: saga.CodeAttemptsExhausted, Message: "gave up after 3 attempts: merchant down"}, s.Error)
	require.Equal(t, []string{
		"a/forward/done/1", "b/forward/done/1", "c/forward/done/1", "d/forward/failed/3",
		"c/compensate/skipped/0", "b/compensate/done/1", "a/compensate/done/1",
	}, statuses(s))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{fmt.Sprintf("%d:b:compensate", id), fmt.Sprintf("%d:a:compensate", id)}, undone)
}

func TestCompensationFailureNeedsAttentionThenRetry(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var refundWorks atomic.Bool
	var refunds atomic.Int32
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "debit", Do: saga.Local(effect("debit")), Compensate: saga.Local(
			func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
				refunds.Add(1)
				if !refundWorks.Load() {
					return saga.Retry(errors.New("ledger locked"))
				}
				return effect("refund")(ctx, tx, s)
			})},
		saga.Step{Name: "ship", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Fail("rejected", errors.New("merchant rejected the order"))
		})},
	))
	runEngine(t, e)

	id := start(t, pool, e, "deposit", nil)
	s := wait(t, e, id)
	require.Equal(t, saga.NeedsAttention, s.State)
	require.Equal(t, saga.CodeCompensationFailed, s.Error.Code)
	require.Contains(t, s.Error.Message, `compensation of step "debit" failed`)
	require.Contains(t, s.Error.Message, "ledger locked")
	require.Contains(t, s.Error.Message, "rejected: merchant rejected the order")
	require.EqualValues(t, 3, refunds.Load(), "MaxAttempts, then it stops")

	refundWorks.Store(true)
	require.NoError(t, e.Retry(context.Background(), id))
	s = wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "rejected", Message: "merchant rejected the order"}, s.Error)
	require.Equal(t, []string{
		"debit/forward/done/1", "ship/forward/failed/1", "debit/compensate/failed/3", "debit/compensate/done/1",
	}, statuses(s))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE step = 'refund'`))

	require.ErrorIs(t, e.Retry(context.Background(), id), saga.ErrNotRetryable)
	require.ErrorIs(t, e.Retry(context.Background(), id+1000), saga.ErrNotFound)
}

func TestFirstStepFailFails(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var compensated atomic.Bool
	e := newEngine(t, pool, saga.Options{}, fast("purchase",
		saga.Step{Name: "debit", Do: saga.Local(func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
			effect("debit")(ctx, tx, s) // rolled back with the failure
			return saga.Fail("insufficient_funds", errors.New("balance 10 < 50"))
		}), Compensate: saga.Local(func(context.Context, pgx.Tx, *saga.Instance) saga.Outcome {
			compensated.Store(true)
			return saga.Done()
		})},
		saga.Step{Name: "order", Do: saga.Local(effect("order"))},
	))
	runEngine(t, e)

	s := wait(t, e, start(t, pool, e, "purchase", nil))
	require.Equal(t, saga.Failed, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: "insufficient_funds", Message: "balance 10 < 50"}, s.Error)
	require.Equal(t, []string{"debit/forward/failed/1"}, statuses(s))
	require.False(t, compensated.Load())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM effects`))
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
		return fast("busy",
			saga.Step{Name: "debit", Do: saga.Local(func(ctx context.Context, tx pgx.Tx, s *saga.Instance) saga.Outcome {
				worked[engine].Add(1)
				return effect("debit")(ctx, tx, s)
			})},
			saga.Step{Name: "notify", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
				if rand.IntN(5) == 0 {
					return saga.Retry(errors.New("try again")) // shuffles sagas between the engines
				}
				return saga.Done()
			})},
			saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
		)
	}
	def0, def1 := def(0), def(1)
	def0.MaxAttempts, def1.MaxAttempts = 50, 50
	e1 := newEngine(t, pool, saga.Options{Owner: "one", Lease: 150 * time.Millisecond}, def0)
	e2 := newEngine(t, pool2, saga.Options{Owner: "two", Lease: 150 * time.Millisecond}, def1)
	runEngine(t, e1)
	runEngine(t, e2)

	ctx := context.Background()
	for range n / 20 {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for range 20 {
				if _, err := e1.Start(ctx, tx, "busy", nil); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	deadline := time.Now().Add(25 * time.Second)
	for count(t, pool, `SELECT count(*) FROM sagas WHERE state = 'completed'`) < n {
		require.True(t, time.Now().Before(deadline), "sagas still running: %d completed",
			count(t, pool, `SELECT count(*) FROM sagas WHERE state = 'completed'`))
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	require.Equal(t, n, count(t, pool, `SELECT count(*) FROM sagas`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(DISTINCT (saga_id, step)) FROM effects`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM saga_steps WHERE step <> 1 AND (attempts <> 1 OR status <> 'done')`))
	require.Positive(t, worked[0].Load(), "engine one worked")
	require.Positive(t, worked[1].Load(), "engine two worked")
}

func TestStoppedRunnerMidRemoteStepResumesElsewhere(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var seen keys
	called := make(chan struct{}, 1)
	def := func(remote saga.RemoteFunc) saga.Definition {
		return fast("deposit",
			saga.Step{Name: "reserve", Do: saga.Local(effect("reserve"))},
			saga.Step{Name: "charge", Do: saga.Remote(remote)},
			saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
		)
	}
	a := newEngine(t, pool, saga.Options{Owner: "a", Lease: 300 * time.Millisecond}, def(
		func(ctx context.Context, key string, _ *saga.Instance) saga.Outcome {
			seen.add(key)
			called <- struct{}{}
			<-ctx.Done() // the payment gateway hangs until the runner goes away
			return saga.Retry(ctx.Err())
		}))
	stopA := runEngine(t, a)
	id := start(t, pool, a, "deposit", nil)
	<-called
	stopA() // returns only once the hanging attempt has ended

	s, err := a.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, saga.Running, s.State)
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/pending/1"}, statuses(s), "the attempt was counted before the call")

	b := newEngine(t, pool, saga.Options{Owner: "b", Lease: 300 * time.Millisecond}, def(
		func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			seen.add(key)
			return saga.Done()
		}))
	runEngine(t, b)
	s = wait(t, b, id)
	require.Equal(t, saga.Completed, s.State)
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/done/2", "credit/forward/done/1"}, statuses(s))
	key := fmt.Sprintf("%d:charge", id)
	require.Equal(t, []string{key, key}, seen.list())
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, id))
}

func TestCrashedRunnersLeaseExpires(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var calledAt atomic.Int64
	var seen keys
	e := newEngine(t, pool, saga.Options{Owner: "survivor", PollInterval: 20 * time.Millisecond}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			calledAt.CompareAndSwap(0, time.Now().UnixNano())
			seen.add(key)
			return saga.Done()
		})},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	id := start(t, pool, e, "deposit", nil)
	// What a runner that crashed during its first call of "charge" leaves behind.
	expires := time.Now().Add(400 * time.Millisecond)
	exec(t, pool, `UPDATE sagas SET attempts = 1, lease_owner = 'crashed', lease_until = now() + interval '400 ms' WHERE id = $1`, id)
	runEngine(t, e)

	s := wait(t, e, id)
	require.Equal(t, saga.Completed, s.State)
	require.GreaterOrEqual(t, calledAt.Load(), expires.Add(-50*time.Millisecond).UnixNano(), "not before the lease expired")
	require.Equal(t, []string{fmt.Sprintf("%d:charge", id)}, seen.list())
	require.Equal(t, []string{"charge/forward/done/2", "credit/forward/done/1"}, statuses(s))
}

func TestWait(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	release := make(chan struct{})
	e := newEngine(t, pool, saga.Options{PollInterval: time.Hour}, fast("slow", saga.Step{Name: "wait",
		Do: saga.Remote(func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
			select {
			case <-release:
				return saga.Done()
			case <-ctx.Done():
				return saga.Retry(ctx.Err())
			}
		})}))
	runEngine(t, e)
	id := start(t, pool, e, "slow", nil)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
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
	case r := <-done: // PollInterval is an hour: only the notification can have woken it
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

func TestStartJoinsCallersTransaction(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	e := newEngine(t, pool, saga.Options{}, fast("k", saga.Step{Name: "s", Do: saga.Local(
		func(context.Context, pgx.Tx, *saga.Instance) saga.Outcome { return saga.Done() })}))
	ctx := context.Background()
	var id int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		id, err = e.Start(ctx, tx, "k", nil)
		require.NoError(t, err)
		return errors.New("caller changes its mind")
	})
	require.Error(t, err)
	_, err = e.Get(ctx, id)
	require.ErrorIs(t, err, saga.ErrNotFound)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.Start(ctx, tx, "nope", nil)
		require.ErrorContains(t, err, `unknown kind "nope"`)
		return nil
	}))
}

func TestRegisterValidates(t *testing.T) {
	t.Parallel()
	ok := saga.Local(func(context.Context, pgx.Tx, *saga.Instance) saga.Outcome { return saga.Done() })
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
		{"negative attempts", saga.Definition{Kind: "k", MaxAttempts: -1, Steps: []saga.Step{{Name: "a", Do: ok}}}, "negative"},
	}
	e := saga.New(nil, saga.Options{})
	for _, tt := range tests {
		require.ErrorContains(t, e.Register(tt.def), tt.want, tt.name)
	}
	good := saga.Definition{Kind: "k", Steps: []saga.Step{{Name: "a", Do: ok, Compensate: remote}, {Name: "b", Do: remote}}}
	require.NoError(t, e.Register(good))
	require.ErrorContains(t, e.Register(good), "already registered")
}

func TestLostLeaseAbandonsTheAttempt(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var calls atomic.Int32
	called, cancelled := make(chan struct{}, 1), make(chan error, 1)
	e := newEngine(t, pool, saga.Options{Lease: 150 * time.Millisecond, PollInterval: 20 * time.Millisecond}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
			if calls.Add(1) > 1 {
				return saga.Done()
			}
			called <- struct{}{}
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return saga.Done() // too late: another runner owns the saga now
		})},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	runEngine(t, e)
	id := start(t, pool, e, "deposit", nil)
	<-called
	exec(t, pool, `UPDATE sagas SET lease_owner = 'thief', lease_until = now() + interval '1 hour' WHERE id = $1`, id)
	select {
	case err := <-cancelled:
		require.Error(t, err, "the heartbeat noticed and cancelled the attempt")
	case <-time.After(10 * time.Second):
		t.Fatal("attempt not cancelled after the lease was lost")
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sagas WHERE lease_owner = 'thief'`))

	exec(t, pool, `UPDATE sagas SET lease_until = now() - interval '1 second' WHERE id = $1`, id) // the thief "crashes"
	s := wait(t, e, id)
	require.Equal(t, saga.Completed, s.State)
	// The late Done of the first call was not recorded: the step took a second attempt.
	require.Equal(t, []string{"charge/forward/done/2", "credit/forward/done/1"}, statuses(s))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects`))
}
