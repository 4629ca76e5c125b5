package saga_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
)

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
