package saga_test

import (
	"context"
	"errors"
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

func names(s saga.Snapshot) []string {
	var out []string
	for _, r := range s.Steps {
		out = append(out, r.Name+"/"+r.Phase+"/"+r.Status)
	}
	return out
}

// A remote step whose every response is lost may have taken effect: it is asked again with
// the same key for its whole window, and once that is exhausted its own compensation runs
// first, then the earlier steps'.
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

	id := startAndDrive(t, e, "deposit").ID
	s := waitSaga(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, saga.CodeAttemptsExhausted, s.Error.Code)
	require.Regexp(t, `^gave up after \d+ attempts over \S+: charged, then the response was lost$`, s.Error.Message)
	require.Equal(t, []string{"reserve/forward/done", "charge/forward/failed", "charge/compensate/done", "reserve/compensate/done"}, names(s))
	require.Greater(t, s.Steps[1].Attempts, 2, "asked forward again before compensating")
	require.Equal(t, []string{s.KeyPrefix + ":charge:compensate", s.KeyPrefix + ":reserve:compensate"}, undone.list())
	require.Equal(t, saga.StepKey(s.KeyPrefix, "charge")+saga.CompensateSuffix, undone.list()[0])
	require.Zero(t, count(t, pool, `SELECT count(*) FROM effects WHERE step = 'credit'`))
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

	id := startAndDrive(t, e, "deposit").ID
	s := waitSaga(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, "timeout", s.Error.Code)
	require.Equal(t, []string{"charge/forward/failed", "charge/compensate/done"}, names(s))
	require.Equal(t, []string{s.KeyPrefix + ":charge:compensate"}, undone.list())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM effects`))
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

	id := startAndDrive(t, e, "deposit").ID
	s := waitSaga(t, e, id)
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/failed/1", "reserve/compensate/done/1"}, statuses(s))
	require.Equal(t, []string{s.KeyPrefix + ":reserve:compensate"}, undone.list())
}
