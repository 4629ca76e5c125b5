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
	require.Greater(t, attempts, 1, "the charge was asked again, with the same key, for the whole window")
	require.Equal(t, op.Steps[0].Attempts, attempts, "every attempt replayed the same charge")
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

// The merchant placed the order but no response came back, ever, and the simulator cannot
// cancel a placed order: once the window is exhausted the purchase needs an operator, with
// the wallet still debited (the order stands) — not silently refunded, not silently kept.
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
	eng := testEngine(pool, "", log)
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
		eng.Close()
		cancel()
		wg.Wait()
	})
	return &env{pool: pool, eng: eng, svc: svc, ctx: ctx}
}

// The provider contract (README, "The payment gateway and merchant contract") on the
// simulators: the same key is the same operation, whatever is asked with it again; an
// outage does nothing and says so retryably.
func TestSimulatorsHonourTheProviderContract(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := t.Context()
	gw := wallet.NewSimGateway(pool, wallet.SimOptions{})
	m := wallet.NewSimMerchant(pool, wallet.SimOptions{})

	first, err := gw.Charge(ctx, "1:charge", 7, 500, "CNY", "card")
	require.NoError(t, err)
	again, err := gw.Charge(ctx, "1:charge", 7, 500, "CNY", "card")
	require.NoError(t, err)
	require.Equal(t, first, again, "the same key is the same charge: asking again is the status query")
	_, err = gw.Charge(ctx, "1:charge", 7, 501, "CNY", "card")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent)
	require.Equal(t, "idempotency_mismatch", code)

	order, err := m.PlaceOrder(ctx, "2:place_order", "shop", "o-1", 300, "CNY")
	require.NoError(t, err)
	again, err = m.PlaceOrder(ctx, "2:place_order", "shop", "o-1", 300, "CNY")
	require.NoError(t, err)
	require.Equal(t, order, again)
	require.NoError(t, m.CancelOrder(ctx, "3:place_order:compensate", "3:place_order"), "nothing to cancel succeeds")
	_, err = m.PlaceOrder(ctx, "3:place_order", "shop", "o-3", 300, "CNY")
	code, permanent = wallet.IsPermanent(err)
	require.True(t, permanent, "a cancelled key refuses a late order: %v", err)
	require.Equal(t, "rejected", code)

	require.NoError(t, wallet.SetSimOutage(ctx, pool, wallet.SimGatewayTarget, wallet.OutageFail, time.Hour))
	_, err = gw.Charge(ctx, "4:charge", 7, 500, "CNY", "card")
	_, permanent = wallet.IsPermanent(err)
	require.Error(t, err)
	require.False(t, permanent, "an outage is retryable")
	refundErr := gw.RefundByKey(ctx, "1:charge:compensate", "1:charge")
	require.ErrorContains(t, refundErr, "simulated gateway outage", "refunds fail too")
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	require.NoError(t, wallet.SetSimOutage(ctx, pool, wallet.SimGatewayTarget, wallet.OutageTimeout, time.Hour))
	_, err = gw.Charge(tctx, "4:charge", 7, 500, "CNY", "card")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a timing-out outage answers nothing")
	var during int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM sim_charges WHERE key = '4:charge'`).Scan(&during))
	require.Zero(t, during, "nothing happened during the outage")
	_, err = m.PlaceOrder(ctx, "5:place_order", "shop", "o-5", 300, "CNY")
	require.NoError(t, err, "the merchant is not out")

	require.NoError(t, wallet.SetSimOutage(ctx, pool, wallet.SimGatewayTarget, wallet.OutageFail, 0))
	_, err = gw.Charge(ctx, "4:charge", 7, 500, "CNY", "card")
	require.NoError(t, err, "over")
	require.Error(t, wallet.SetSimOutage(ctx, pool, "bank", wallet.OutageFail, time.Second))
}

// A gateway and merchant outage while sagas run: the uncertain steps are asked again for
// their window, which outlasts the outage, so every saga completes and none needs an
// operator; each charge and order happens once.
func TestOutageShorterThanTheWindowCompletesEverySaga(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := testEngine(pool, "", log)
	steps := fastSteps
	steps.Window, steps.AttemptTimeout, steps.BackoffMax = 30*time.Second, 200*time.Millisecond, 200*time.Millisecond
	svc, err := wallet.NewService(pool, eng, wallet.NewSimGateway(pool, wallet.SimOptions{}), wallet.NewSimMerchant(pool, wallet.SimOptions{}),
		wallet.Options{Logger: log, Steps: steps})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	defer func() { eng.Close(); cancel(); wg.Wait() }()
	wg.Go(func() { _ = eng.Run(ctx) })
	e := &env{pool: pool, eng: eng, svc: svc, ctx: ctx}
	u := e.user(t)
	e.fund(t, u, 100000)

	require.NoError(t, wallet.SetSimOutage(ctx, pool, wallet.SimGatewayTarget, wallet.OutageFail, 2*time.Second))
	require.NoError(t, wallet.SetSimOutage(ctx, pool, wallet.SimMerchantTarget, wallet.OutageTimeout, 2*time.Second))
	var ids []int64
	for i := range 10 {
		op, err := svc.Deposit(ctx, wallet.DepositRequest{UserID: u, Amount: 100, Background: true})
		require.NoError(t, err)
		ids = append(ids, op.ID)
		op, err = svc.Purchase(ctx, wallet.PurchaseRequest{UserID: u, Amount: 50, Merchant: "m", Reference: fmt.Sprintf("o-%d", i), Background: true})
		require.NoError(t, err)
		ids = append(ids, op.ID)
	}
	e.waitTerminal(t, ids)
	var completed, retried, charges, orders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sagas WHERE id = ANY($1) AND state = 'completed'),
		(SELECT count(*) FROM saga_steps WHERE saga_id = ANY($1) AND attempts > 1),
		(SELECT count(*) FROM sim_charges WHERE status = 'charged'), (SELECT count(*) FROM sim_orders WHERE status = 'placed')`, ids).
		Scan(&completed, &retried, &charges, &orders))
	require.Equal(t, 20, completed, "every saga completed")
	require.Positive(t, retried, "the outage was met")
	require.Equal(t, 11, charges)
	require.Equal(t, 10, orders)
	require.Equal(t, wallet.Money(100000+10*100-10*50), e.balance(t, u))
	e.checkInvariants(t, u)
}
