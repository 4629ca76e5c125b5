package saga_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
)

// undoRecorder is a remote compensation that records its idempotency key.
func undoRecorder(k *keys) saga.Action {
	return saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
		k.add(key)
		return saga.Done()
	})
}

// A remote step whose every response is lost may have taken effect: once its attempts run
// out, its own compensation runs first, then the earlier steps'.
func TestExhaustedRemoteStepIsCompensatedItself(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var undone keys
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "reserve", Do: saga.Local(effect("reserve")), Compensate: undoRecorder(&undone)},
		saga.Step{Name: "charge", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Retry(errors.New("charged, then the response was lost"))
		}), Compensate: undoRecorder(&undone)},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	runEngine(t, e)

	id := start(t, pool, e, "deposit", nil)
	s := wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, &saga.ErrorInfo{Code: saga.CodeAttemptsExhausted, Message: "gave up after 3 attempts: charged, then the response was lost"}, s.Error)
	require.Equal(t, []string{
		"reserve/forward/done/1", "charge/forward/failed/3", "charge/compensate/done/1", "reserve/compensate/done/1",
	}, statuses(s))
	require.Equal(t, []string{fmt.Sprintf("%d:charge:compensate", id), fmt.Sprintf("%d:reserve:compensate", id)}, undone.list())
	require.Equal(t, saga.StepKey(id, "charge")+saga.CompensateSuffix, undone.list()[0])
}

// Attempt timeouts are no definite outcome either; a first step compensated this way
// leaves the saga Compensated, not Failed.
func TestTimedOutFirstStepIsCompensated(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var undone keys
	def := fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(ctx context.Context, _ string, _ *saga.Instance) saga.Outcome {
			<-ctx.Done() // the gateway never answers
			return saga.Outcome{Kind: saga.OutcomeRetry, Code: "timeout", Err: ctx.Err()}
		}), Compensate: undoRecorder(&undone)},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	)
	def.AttemptTimeout = 20 * time.Millisecond
	e := newEngine(t, pool, saga.Options{}, def)
	runEngine(t, e)

	id := start(t, pool, e, "deposit", nil)
	s := wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, "timeout", s.Error.Code)
	require.Equal(t, []string{"charge/forward/failed/3", "charge/compensate/done/1"}, statuses(s))
	require.Equal(t, []string{fmt.Sprintf("%d:charge:compensate", id)}, undone.list())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM effects`))
}

// Attempts lost to crashes (counted, never recorded) leave no definite outcome either.
func TestAttemptsLostInCrashesCompensateTheStep(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var undone keys
	var calls keys
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			calls.add(key)
			return saga.Done()
		}), Compensate: undoRecorder(&undone)},
	))
	id := start(t, pool, e, "deposit", nil)
	// Three runners crashed in turn during the call, after counting their attempts.
	exec(t, pool, `UPDATE sagas SET attempts = 3 WHERE id = $1`, id)
	runEngine(t, e)

	s := wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, saga.CodeAttemptsExhausted, s.Error.Code)
	require.Empty(t, calls.list(), "no fourth attempt")
	require.Equal(t, []string{fmt.Sprintf("%d:charge:compensate", id)}, undone.list())
}

// A step that failed for good (a declined card) did not happen: it is not compensated.
func TestFailedRemoteStepIsNotCompensated(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	var undone keys
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "reserve", Do: saga.Local(effect("reserve")), Compensate: undoRecorder(&undone)},
		saga.Step{Name: "charge", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Fail("declined", errors.New("card declined"))
		}), Compensate: undoRecorder(&undone)},
	))
	runEngine(t, e)

	id := start(t, pool, e, "deposit", nil)
	s := wait(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/failed/1", "reserve/compensate/done/1"}, statuses(s))
	require.Equal(t, []string{fmt.Sprintf("%d:reserve:compensate", id)}, undone.list())
}
