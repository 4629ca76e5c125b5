package saga_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

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
	ids := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			e := []*saga.Engine{e1, e2}[i%2]
			st, err := e.Start(context.Background(), "busy", nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = st.ID()
			if i%5 == 0 {
				return // "crashed" after the first commit
			}
			_, _ = e.Drive(context.Background(), st)
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	for i, id := range ids {
		s, err := []*saga.Engine{e1, e2}[i%2].Wait(ctx, id) // whichever engine ends it
		require.NoError(t, err, "waiting for saga %d to complete", id)
		require.Equal(t, saga.Completed, s.State, "saga %d", id)
	}
	require.Equal(t, n, count(t, pool, `SELECT count(*) FROM sagas`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(*) FROM effects`))
	require.Equal(t, 2*n, count(t, pool, `SELECT count(DISTINCT (saga_id, step)) FROM effects`))
	require.Positive(t, worked[0].Load(), "engine one worked")
	require.Positive(t, worked[1].Load(), "engine two worked")
}
