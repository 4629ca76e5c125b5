package saga_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
)

type stepLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *stepLog) ObserveStep(kind, step, phase string, o saga.OutcomeKind, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if took < 0 {
		panic("negative duration")
	}
	l.seen = append(l.seen, kind+"/"+step+"/"+phase+"/"+o.String())
}

func (l *stepLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func TestResolveObserveAndCount(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	obs := &stepLog{}
	e := newEngine(t, pool, saga.Options{Observer: obs}, fast("deposit",
		saga.Step{Name: "debit", Do: saga.Local(effect("debit")), Compensate: saga.Remote(
			func(context.Context, string, *saga.Instance) saga.Outcome {
				return saga.Fail("gone", errors.New("refund refused"))
			})},
		saga.Step{Name: "ship", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Fail("rejected", errors.New("merchant rejected the order"))
		})},
	))
	stop := runEngine(t, e)
	id := startAndDrive(t, e, "deposit").ID
	require.Equal(t, saga.NeedsAttention, waitSaga(t, e, id).State)
	stop()
	require.Equal(t, []string{
		"deposit/debit/forward/done", "deposit/ship/forward/fail", "deposit/debit/compensate/fail",
	}, obs.all(), "every attempt, with its phase and outcome")

	ctx := context.Background()
	counts, err := e.CountByKindState(ctx)
	require.NoError(t, err)
	require.Equal(t, []saga.KindStateCount{{Kind: "deposit", State: saga.NeedsAttention, Count: 1}}, counts)

	// Resolve commits with the caller's transaction, or not at all.
	err = pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, e.ResolveTx(ctx, tx, id))
		return errors.New("the audit insert failed")
	})
	require.Error(t, err)
	s, err := e.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, saga.NeedsAttention, s.State, "rolled back with the caller")

	require.NoError(t, pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return e.ResolveTx(ctx, tx, id) }))
	s = waitSaga(t, e, id)
	require.Equal(t, saga.Resolved, s.State)
	require.True(t, s.State.Terminal())
	require.Equal(t, saga.CodeCompensationFailed, s.Error.Code, "the error stays for the record")
	err = pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return e.ResolveTx(ctx, tx, id) })
	require.ErrorIs(t, err, saga.ErrNotRetryable)
	err = pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return e.RetryTx(ctx, tx, id) })
	require.ErrorIs(t, err, saga.ErrNotRetryable, "a resolved saga is never retried")
	err = pg.WithTx(ctx, pool, func(tx pgx.Tx) error { return e.ResolveTx(ctx, tx, id+1000) })
	require.ErrorIs(t, err, saga.ErrNotFound)
}
