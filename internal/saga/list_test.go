package saga_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
)

// List is how other packages read saga state: by ids, kinds, state and an id bound, newest
// first, without input, data or history.
func TestListSelectsNewestFirst(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	e := newEngine(t, pool, saga.Options{},
		fast("ok", saga.Step{Name: "a", Do: saga.Local(effect("a"))}),
		fast("refused", saga.Step{Name: "a", Do: saga.Local(effect("refused"))}),
		fast("other", saga.Step{Name: "a", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			return saga.Fail("no", errors.New("no"))
		})}),
	)
	var ok, refused []int64
	for range 3 {
		ok = append(ok, startAndDrive(t, e, "ok").ID)
		refused = append(refused, startAndDrive(t, e, "refused").ID)
	}
	other := startAndDrive(t, e, "other").ID
	ctx := context.Background()
	ids := func(f saga.ListFilter) []int64 {
		t.Helper()
		got, err := e.List(ctx, f)
		require.NoError(t, err)
		out := []int64{}
		for _, s := range got {
			require.Nil(t, s.Steps)
			require.Nil(t, s.Input)
			require.False(t, s.CreatedAt.IsZero())
			if f.State != "" {
				require.Equal(t, f.State, s.State)
			}
			out = append(out, s.ID)
		}
		return out
	}

	require.Equal(t, []int64{other, refused[2], ok[2], refused[1]}, ids(saga.ListFilter{Limit: 4}))
	require.Equal(t, []int64{refused[2], refused[1], refused[0]}, ids(saga.ListFilter{State: saga.Failed, Kinds: []string{"ok", "refused"}, Limit: 10}))
	require.Equal(t, []int64{other, refused[2], refused[1], refused[0]}, ids(saga.ListFilter{State: saga.Failed, Limit: 10}))
	require.Equal(t, []int64{ok[1], ok[0]}, ids(saga.ListFilter{Kinds: []string{"ok"}, Before: ok[2], Limit: 10}))
	require.Equal(t, []int64{ok[2], ok[0]}, ids(saga.ListFilter{IDs: []int64{ok[0], ok[2], refused[0], other + 1000}, State: saga.Completed, Limit: 10}))
	require.Empty(t, ids(saga.ListFilter{IDs: []int64{}, Limit: 10}), "no ids selects none")

	got, err := e.List(ctx, saga.ListFilter{IDs: []int64{refused[0]}, Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "refused", got[0].Kind)
	require.Equal(t, "refused", got[0].Error.Code)

	_, err = e.List(ctx, saga.ListFilter{})
	require.ErrorContains(t, err, "limit")
	_, err = e.List(ctx, saga.ListFilter{Limit: 1001})
	require.ErrorContains(t, err, "limit")
}
