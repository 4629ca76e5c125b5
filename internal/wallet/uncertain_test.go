package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// lostChargeResponses is the simulated gateway, except that every charge takes effect and
// then its response is lost. It counts the refunds asked of it.
type lostChargeResponses struct {
	*wallet.SimGateway
	refunds *atomic.Int32
}

func (g lostChargeResponses) Charge(ctx context.Context, key string, user int64, amount wallet.Money, currency, source string) (string, error) {
	if _, err := g.SimGateway.Charge(ctx, key, user, amount, currency, source); err != nil {
		return "", err
	}
	return "", wallet.RetryableError("unavailable", errors.New("charged, then the response was lost"))
}

func (g lostChargeResponses) RefundByKey(ctx context.Context, key, chargeKey string) error {
	g.refunds.Add(1)
	return g.SimGateway.RefundByKey(ctx, key, chargeKey)
}

func newLostChargeEnv(t *testing.T) (*env, *atomic.Int32) {
	t.Helper()
	pool, _ := testdb.New(t)
	refunds := new(atomic.Int32)
	e := newEnvOn(t, pool, envOptions{gateway: lostChargeResponses{wallet.NewSimGateway(pool, wallet.SimOptions{}), refunds}})
	return e, refunds
}

// The gateway charged the card on every attempt but no response came back: the deposit is
// compensated by refunding the charge by its key, exactly once, and the wallet is untouched.
func TestDepositWithLostChargeResponsesRefundsTheCharge(t *testing.T) {
	t.Parallel()
	e, refunds := newLostChargeEnv(t)
	u := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 10000})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, saga.CodeAttemptsExhausted, op.Error.Code)
	require.Equal(t, []string{"charge/forward/failed", "charge/compensate/done"}, stepStatuses(op))
	var rows, attempts int
	var status, refundKey string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) OVER (), status, refund_key, attempts FROM sim_charges`).
		Scan(&rows, &status, &refundKey, &attempts))
	require.Equal(t, 1, rows, "one charge")
	require.Equal(t, "refunded", status)
	require.Equal(t, fmt.Sprintf("%d:charge:compensate", op.ID), refundKey)
	require.Equal(t, fastSteps.MaxAttempts, attempts, "every attempt replayed the same charge")
	require.EqualValues(t, 1, refunds.Load(), "refunded once")
	require.Equal(t, wallet.Money(0), e.balance(t, u))
	require.Empty(t, e.kinds(t, u))
	e.checkInvariants(t, u)
}

// A declined card is a definite outcome: the deposit fails and nothing is refunded.
func TestDepositDeclinedIsNotRefunded(t *testing.T) {
	t.Parallel()
	e, refunds := newLostChargeEnv(t)
	u := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 10000, Source: wallet.DeclinedSource})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Failed, op.State)
	require.Equal(t, "declined", op.Error.Code)
	require.Equal(t, []string{"charge/forward/failed"}, stepStatuses(op))
	require.Zero(t, refunds.Load(), "no refund call")
	var status string
	var refundKey *string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT status, refund_key FROM sim_charges`).Scan(&status, &refundKey))
	require.Equal(t, "declined", status)
	require.Nil(t, refundKey)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
}

// Refunding a key that was never charged succeeds and voids the key: a charge with it
// arriving late is declined, so no money can be taken after the refund.
func TestSimGatewayRefundByKeyVoidsAnUnusedKey(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := t.Context()
	gw := wallet.NewSimGateway(pool, wallet.SimOptions{})

	require.NoError(t, gw.RefundByKey(ctx, "7:charge:compensate", "7:charge"))
	require.NoError(t, gw.RefundByKey(ctx, "7:charge:compensate", "7:charge"), "idempotent")
	_, err := gw.Charge(ctx, "7:charge", 1, 500, "CNY", "card")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, "declined", code)

	// A charge that went through is refunded once, whatever the retries.
	_, err = gw.Charge(ctx, "8:charge", 1, 500, "CNY", "card")
	require.NoError(t, err)
	require.NoError(t, gw.RefundByKey(ctx, "8:charge:compensate", "8:charge"))
	require.NoError(t, gw.RefundByKey(ctx, "8:charge:compensate", "8:charge"))
	var charged, refunded int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'charged'),
		count(*) FILTER (WHERE status = 'refunded' AND refund_key = '8:charge:compensate') FROM sim_charges`).Scan(&charged, &refunded))
	require.Zero(t, charged)
	require.Equal(t, 1, refunded)
}

// lostOrderResponses is the simulated merchant, except that PlaceOrder fails without a
// response: after placing the order (placed) or before reaching the merchant (!placed).
type lostOrderResponses struct {
	*wallet.SimMerchant
	placed bool
}

func (m lostOrderResponses) PlaceOrder(ctx context.Context, key, merchant, reference string, amount wallet.Money, currency string) (string, error) {
	if m.placed {
		if _, err := m.SimMerchant.PlaceOrder(ctx, key, merchant, reference, amount, currency); err != nil {
			return "", err
		}
	}
	return "", wallet.RetryableError("unavailable", errors.New("no response from the merchant"))
}

// The merchant placed the order but no response came back, and the simulator cannot cancel
// a placed order: the purchase needs an operator, with the wallet still debited (the order
// stands) — not silently refunded, not silently kept.
func TestPurchaseWithLostOrderResponseNeedsAttention(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	e := newEnvOn(t, pool, envOptions{merchant: lostOrderResponses{wallet.NewSimMerchant(pool, wallet.SimOptions{}), true}})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "o-1"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.NeedsAttention, op.State)
	require.Equal(t, saga.CodeCompensationFailed, op.Error.Code)
	require.Contains(t, op.Error.Message, wallet.CodeNotCancellable)
	require.Equal(t, []string{"debit/forward/done", "place_order/forward/failed", "place_order/compensate/failed"}, stepStatuses(op))
	var status string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT status FROM sim_orders`).Scan(&status))
	require.Equal(t, "placed", status)
	require.Equal(t, wallet.Money(7000), e.balance(t, u), "paid for the order that stands")
	e.checkInvariants(t, u)
}

// The merchant never got the order: cancelling by key finds nothing, voids the key, and the
// wallet is refunded.
func TestPurchaseWithUnreachableMerchantRefunds(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	sim := wallet.NewSimMerchant(pool, wallet.SimOptions{})
	e := newEnvOn(t, pool, envOptions{merchant: lostOrderResponses{sim, false}})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "o-2"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, saga.CodeAttemptsExhausted, op.Error.Code)
	require.Equal(t, []string{"debit/forward/done", "place_order/forward/failed", "place_order/compensate/done", "debit/compensate/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	e.checkInvariants(t, u)

	// The order arriving late at the merchant is rejected.
	_, err = sim.PlaceOrder(e.ctx, saga.StepKey(op.ID, "place_order"), "shop", "o-2", 3000, "CNY")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, "rejected", code)
	var placed int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM sim_orders WHERE status = 'placed'`).Scan(&placed))
	require.Zero(t, placed)
}

// newEnvOn is newEnv on a pool the caller already has (to build remotes on it).
func newEnvOn(t *testing.T, pool *pgxpool.Pool, o envOptions) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := saga.New(pool, saga.Options{PollInterval: 200 * time.Millisecond, Workers: 16, Logger: log})
	gw, m := o.gateway, o.merchant
	if gw == nil {
		gw = wallet.NewSimGateway(pool, wallet.SimOptions{})
	}
	if m == nil {
		m = wallet.NewSimMerchant(pool, wallet.SimOptions{})
	}
	svc, err := wallet.NewService(pool, eng, gw, m, wallet.Options{Logger: log, Steps: fastSteps})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = eng.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return &env{pool: pool, eng: eng, svc: svc, ctx: ctx}
}
