package wallet_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// roundTrips counts what a pool sends to Postgres: statements on their own (each one round
// trip, and a transaction of its own outside one) and batches (one round trip, and one
// transaction, each).
type roundTrips struct{ queries, batches atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.queries.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.batches.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Each saga takes the round trips the design promises, measured at the driver: a deposit, a
// purchase or a withdrawal two commits (before and after its remote call), a transfer one, and no read
// before or after them (the request's checks ride on the first commit, with the wallet's
// currency cached since the user was created). The provider simulator, reached over HTTP,
// keeps its charges and orders in memory.
func TestEachSagaTakesItsRoundTrips(t *testing.T) {
	t.Parallel()
	pool, url := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := testEngine(traced, "", log)
	t.Cleanup(func() { require.NoError(t, eng.Recovery().Stop(context.Background())) })
	p := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(traced, eng, p.Gateway, p.Merchant, wallet.Options{Logger: log, Steps: fastSteps})
	require.NoError(t, err)
	e := &env{pool: pool, eng: eng, svc: svc, ctx: t.Context(), prov: p}
	a, b := e.user(t), e.user(t)
	e.fund(t, a, 10000) // allocates saga ids and prepares the statements

	measure := func(what string, queries, batches int64, run func() wallet.Operation) wallet.Operation {
		t.Helper()
		q0, b0 := rt.queries.Load(), rt.batches.Load()
		op := run()
		require.Equal(t, queries, rt.queries.Load()-q0, "%s: statements on their own", what)
		require.Equal(t, batches, rt.batches.Load()-b0, "%s: batches", what)
		return op
	}
	op := measure("deposit", 0, 2, func() wallet.Operation {
		op, err := svc.Deposit(e.ctx, wallet.DepositRequest{UserID: a, Amount: 500, IdempotencyKey: "dep-rt"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Completed, op.State)
	require.Len(t, op.Steps, 2, "the history comes from the commits")
	op = measure("purchase", 0, 2, func() wallet.Operation {
		op, err := svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: a, Amount: 300, Merchant: "m", Reference: "r-1", IdempotencyKey: "pur-rt"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Completed, op.State)
	op = measure("rejected purchase (debit, then refund with the order's outcome)", 0, 2, func() wallet.Operation {
		op, err := svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: a, Amount: 300, Merchant: "m", Reference: "reject-1"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Compensated, op.State)
	op = measure("withdrawal", 0, 2, func() wallet.Operation {
		op, err := svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: a, Amount: 300, Destination: "bank", IdempotencyKey: "wd-rt"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Completed, op.State)
	op = measure("refused withdrawal (debit, then refund with the payout's outcome)", 0, 2, func() wallet.Operation {
		op, err := svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: a, Amount: 300, Destination: "reject-1"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Compensated, op.State)
	op = measure("transfer", 0, 1, func() wallet.Operation {
		op, err := svc.Transfer(e.ctx, wallet.TransferRequest{From: a, To: b, Amount: 200, IdempotencyKey: "tr-rt"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Completed, op.State)
	// Insufficient funds: the debit's statement fails, so the first commit is planned again
	// with that outcome and sent once more: one transaction committed, as failed.
	op = measure("purchase beyond the balance", 0, 2, func() wallet.Operation {
		op, err := svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: b, Amount: 201, Merchant: "m", Reference: "r-2"})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Failed, op.State)
	require.Equal(t, wallet.CodeInsufficientFunds, op.Error.Code)
	// A user this service has not seen yet (created by another replica) costs one read (and
	// this new engine its first block of saga ids, one statement per 64 sagas).
	c, _, err := e.svc.CreateUser(e.ctx, wallet.NewUser{Name: "Elsewhere", Phone: "+8613800138000"})
	require.NoError(t, err)
	other, err := wallet.NewService(traced, testEngine(traced, "other", log), p.Gateway, p.Merchant, wallet.Options{Logger: log, Steps: fastSteps})
	require.NoError(t, err)
	op = measure("deposit for a user created elsewhere", 2, 2, func() wallet.Operation {
		op, err := other.Deposit(e.ctx, wallet.DepositRequest{UserID: c.ID, Amount: 100})
		require.NoError(t, err)
		return op
	})
	require.Equal(t, saga.Completed, op.State)
	e.checkInvariants(t, a)
	e.checkInvariants(t, b)
}
