package saga_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
