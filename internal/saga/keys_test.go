package saga_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/migrations"
)

// keyNonceVersion is the wallet migration that gave sagas their key nonce.
const keyNonceVersion = 21

// A saga in flight when the key nonce's migration runs keeps the keys it was sending
// ("<id>:<step>"), so that it asks again about its charge under the key the charge was made
// with; a saga started after it gets keys of its own ("<id>-<nonce>:<step>"). Going back
// below the migration is refused while such a saga may still call.
func TestSagaFromBeforeTheNonceKeepsItsKeys(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() //nolint:errcheck // a view of pool
	p, err := migrations.Wallet.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, keyNonceVersion-1)
	require.NoError(t, err)

	// As the engine before the migration left it: its charge asked once, unanswered, and due again.
	const old = 7
	exec(t, pool, `INSERT INTO sagas (id, kind, state, input, step, phase, attempts, fence, next_run_at)
		VALUES ($1, 'deposit', 'running', 'null', 0, 'forward', 1, 1, now())`, old)
	exec(t, pool, `INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts)
		VALUES ($1, 1, 0, 'charge', 'forward', 'pending', 1)`, old)
	_, err = p.Up(ctx)
	require.NoError(t, err)

	var seen keys
	e := newEngine(t, pool, saga.Options{}, fast("deposit",
		saga.Step{Name: "charge", Do: saga.Remote(func(_ context.Context, key string, _ *saga.Instance) saga.Outcome {
			seen.add(key)
			return saga.Done()
		})},
		saga.Step{Name: "credit", Do: saga.Local(effect("credit"))},
	))
	runEngine(t, e)
	s := waitSaga(t, e, old)
	require.Equal(t, saga.Completed, s.State)
	require.Equal(t, "7", s.KeyPrefix)
	require.Equal(t, []string{"7:charge"}, seen.list(), "the key it was sending before the migration")
	require.Equal(t, []saga.StepRecord{
		{Step: 0, Name: "charge", Phase: "forward", Status: "done", Attempts: 2},
		{Step: 1, Name: "credit", Phase: "forward", Status: "done", Attempts: 1},
	}, s.Steps, "the history written before the migration, in the saga's row, went on from its open record")

	st := start(t, e, "deposit", nil)
	prefix := st.Snapshot().KeyPrefix
	require.Regexp(t, fmt.Sprintf(`^%d-[0-9a-f]{32}$`, st.ID()), prefix)
	_, err = p.DownTo(ctx, keyNonceVersion-1)
	require.ErrorContains(t, err, "still in flight", "a saga with a nonce may still call")
	// goose undid the later migrations, each in its own transaction, before 00021 refused:
	// bring them back before driving the saga. They come back with new types (00027's
	// domains, dropped and created again), which the statements the engine's connections
	// prepared still name: a process that lived through a schema going down and up would
	// fail each of them once. This one starts its connections afresh.
	_, err = p.Up(ctx)
	require.NoError(t, err)
	pool.Reset()

	s, err = e.Drive(ctx, st)
	require.NoError(t, err)
	require.Equal(t, saga.Completed, s.State)
	require.Equal(t, []string{"7:charge", prefix + ":charge"}, seen.list())
	_, err = p.DownTo(ctx, keyNonceVersion-1)
	require.NoError(t, err, "nothing in flight: the nonces may go")
	_, err = p.Up(ctx)
	require.NoError(t, err)
}
