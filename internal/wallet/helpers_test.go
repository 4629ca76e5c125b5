package wallet_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// env is a wallet service on a database of its own, with the saga engine's recovery running
// unless asked otherwise (requests run their sagas inline either way).
type env struct {
	pool *pgxpool.Pool
	eng  *saga.Engine
	svc  *wallet.Service
	ctx  context.Context
	// prov is the provider simulator the service reaches over HTTP, through the adapters
	// (unless the test gave a gateway or merchant of its own, which may wrap them).
	prov *simtest.Provider
}

type envOptions struct {
	noRunner bool
	prov     *simtest.Provider // nil: a simulator on a memory store
	gateway  wallet.PaymentGateway
	merchant wallet.Merchant
	// eventVersion is wallet.Options.EventVersion (0: the default).
	eventVersion int
}

// fastSteps keeps retries quick: flaky- orders need two backoffs, and an uncertain step is
// given up after three seconds (long enough that a loaded machine's slow attempt is not
// taken for an outage).
var fastSteps = wallet.StepTuning{Window: 3 * time.Second, AttemptTimeout: time.Second, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond}

// testEngine is a saga engine with a lease short enough that recovery tests need not wait.
func testEngine(pool *pgxpool.Pool, owner string, log *slog.Logger) *saga.Engine {
	return saga.New(pool, saga.Options{Owner: owner, Lease: 2 * time.Second, PollInterval: 50 * time.Millisecond, Workers: 16, Logger: log})
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	pool, _ := testdb.New(t)
	return newEnvOn(t, pool, o)
}

// newEnvOn is newEnv on a pool the caller already has.
func newEnvOn(t *testing.T, pool *pgxpool.Pool, o envOptions) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := testEngine(pool, "", log)
	if o.prov == nil {
		o.prov = simtest.Start(t, nil, providersim.Options{})
	}
	gw, m := o.gateway, o.merchant
	if gw == nil {
		gw = o.prov.Gateway
	}
	if m == nil {
		m = o.prov.Merchant
	}
	svc, err := wallet.NewService(pool, eng, gw, m, wallet.Options{Logger: log, Steps: fastSteps, EventVersion: o.eventVersion})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e := &env{pool: pool, eng: eng, svc: svc, ctx: ctx, prov: o.prov}
	if !o.noRunner {
		require.NoError(t, eng.Recovery().Start(ctx))
	}
	t.Cleanup(func() {
		require.NoError(t, eng.Recovery().Stop(context.Background()))
		cancel()
	})
	return e
}

// user creates a user and returns its id.
func (e *env) user(t *testing.T) int64 {
	t.Helper()
	u, _, err := e.svc.CreateUser(e.ctx, wallet.NewUser{Name: "Test User", Phone: "+8613800138000"})
	require.NoError(t, err)
	return u.ID
}

// wait waits until saga id is terminal and returns it.
func (e *env) wait(t *testing.T, id int64) wallet.Operation {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	op, err := e.svc.WaitSaga(ctx, id)
	require.NoError(t, err)
	require.Truef(t, op.State.Terminal(), "saga %d still %s", id, op.State)
	return op
}

// fund deposits amount into user's wallet and waits for it to complete.
func (e *env) fund(t *testing.T, user int64, amount wallet.Money) {
	t.Helper()
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: user, Amount: amount})
	require.NoError(t, err)
	require.Equal(t, saga.Completed, e.wait(t, op.ID).State)
}

// balance returns a user's balance.
func (e *env) balance(t *testing.T, user int64) wallet.Money {
	t.Helper()
	w, err := e.svc.GetWallet(e.ctx, user)
	require.NoError(t, err)
	return w.Balance
}

// waitTerminal waits until every saga in ids is terminal, on the engine's waiters (a
// deadline, no fixed sleep), one saga at a time: many concurrent waits would each hold a
// connection.
func (e *env) waitTerminal(t *testing.T, ids []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for _, id := range ids {
		s, err := e.eng.Wait(ctx, id)
		require.NoError(t, err, "waiting for saga %d to end", id)
		require.True(t, s.State.Terminal(), "saga %d", id)
	}
}

// checkInvariants asserts, for user: balance >= 0, balance = sum of the ledger, events
// numbered 1..n without gaps, ledger rows and events one to one, the last event's
// balance_after = balance, and last_seq = n.
func (e *env) checkInvariants(t *testing.T, user int64) {
	t.Helper()
	var balance, ledgerSum, lastSeq, nLedger, nEvents, maxSeq, minSeq, distinct int64
	require.NoError(t, e.pool.QueryRow(e.ctx, `
SELECT w.balance, w.event_seq,
       (SELECT COALESCE(sum(amount), 0) FROM ledger_entries WHERE user_id = w.user_id),
       (SELECT count(*) FROM ledger_entries WHERE user_id = w.user_id),
       (SELECT count(*) FROM wallet_events WHERE user_id = w.user_id),
       (SELECT COALESCE(max(seq), 0) FROM wallet_events WHERE user_id = w.user_id),
       (SELECT COALESCE(min(seq), 1) FROM wallet_events WHERE user_id = w.user_id),
       (SELECT count(DISTINCT seq) FROM wallet_events WHERE user_id = w.user_id)
FROM wallets w WHERE w.user_id = $1`, user).Scan(&balance, &lastSeq, &ledgerSum, &nLedger, &nEvents, &maxSeq, &minSeq, &distinct))
	require.GreaterOrEqual(t, balance, int64(0))
	require.Equal(t, balance, ledgerSum, "balance = sum(ledger)")
	require.Equal(t, nLedger, nEvents, "one event per ledger row")
	require.Equal(t, nEvents, maxSeq, "seqs 1..n")
	require.Equal(t, nEvents, distinct, "seqs distinct")
	require.Equal(t, int64(1), minSeq, "seqs start at 1")
	require.Equal(t, maxSeq, lastSeq, "last_seq = max(seq)")
	if nEvents > 0 {
		var after int64
		require.NoError(t, e.pool.QueryRow(e.ctx,
			`SELECT balance_after FROM wallet_events WHERE user_id = $1 AND seq = $2`, user, maxSeq).Scan(&after))
		require.Equal(t, balance, after, "last event's balance_after = balance")
	}
}
