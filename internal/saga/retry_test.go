package saga_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
)

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
