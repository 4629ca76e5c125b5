package saga_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// blockedUntil is a one-step definition whose step waits for release.
func blockedUntil(kind string, release <-chan struct{}) saga.Definition {
	d := fast(kind, saga.Step{Name: "wait", Do: saga.Remote(func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
		select {
		case <-release:
			return saga.Done()
		case <-ctx.Done():
			return saga.Retry(ctx.Err())
		}
	})})
	d.AttemptTimeout = 20 * time.Second
	return d
}

// Many concurrent Waits take no connection of their own: the pool never grows past
// MaxConns, and nothing outside the pool connects.
func TestConcurrentWaitsStayWithinThePool(t *testing.T) {
	t.Parallel()
	const (
		n        = 200
		maxConns = 10
		app      = "saga_wait_test"
	)
	pool, url := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	epool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(epool.Close)

	release := make(chan struct{})
	e := newEngine(t, epool, saga.Options{}, blockedUntil("slow", release))
	ids := make([]int64, n)
	for i := range ids {
		st := start(t, e, "slow", nil)
		ids[i] = st.ID()
		e.Go(st)
	}

	// Sample the engine's connections, as the pool and as the server count them.
	var maxPool, maxServer, samples atomic.Int32
	var sampled wait.Signal // raised after each sample
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			maxPool.Store(max(maxPool.Load(), epool.Stat().TotalConns()))
			var server int32
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = $1`, app).Scan(&server); err == nil {
				maxServer.Store(max(maxServer.Load(), server))
				samples.Add(1)
				sampled.Raise()
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	type result struct {
		s   saga.Snapshot
		err error
	}
	results := make(chan result, n)
	for _, id := range ids {
		go func() {
			s, err := e.Wait(ctx, id)
			results <- result{s, err}
		}()
	}
	// Let the waiters settle in while every saga is still blocked, then let them all end.
	wait.On(t, 10*time.Second, "samples during the waits", sampled.Next, func() bool { return samples.Load() >= 30 })
	close(release)
	for range n {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, saga.Completed, r.s.State)
	}
	close(stopSampling)
	sampling.Wait()

	t.Logf("%d samples: at most %d pool connections, %d on the server", samples.Load(), maxPool.Load(), maxServer.Load())
	require.LessOrEqual(t, maxPool.Load(), int32(maxConns), "the pool stayed within MaxConns")
	require.LessOrEqual(t, maxServer.Load(), int32(maxConns), "only the pool's connections")
	require.Positive(t, maxServer.Load())
}

// A waiter whose saga ends elsewhere (here: behind the engine's back, as another replica
// would) is woken by the periodic re-check.
func TestWaitRechecksWithoutANotification(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	e := newEngine(t, pool, saga.Options{PollInterval: 50 * time.Millisecond}, blockedUntil("slow", nil))
	id := start(t, e, "slow", nil).ID() // not driven: it stays running

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan saga.Snapshot, 1)
	go func() {
		s, err := e.Wait(ctx, id)
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	exec(t, pool, `UPDATE sagas SET state = 'completed' WHERE id = $1`, id)
	select {
	case s := <-done:
		require.Equal(t, saga.Completed, s.State)
	case <-ctx.Done():
		t.Fatal("Wait was not woken by the re-check")
	}
}

// Wait returns on ctx's end even while the database is unreachable, and leaves no
// goroutine behind (goleak checks in TestMain).
func TestWaitReturnsOnContextWhenTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := newEngine(t, pool, saga.Options{}, blockedUntil("slow", nil))

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = e.Wait(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 2*time.Second)
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
