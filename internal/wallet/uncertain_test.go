package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// lostChargeResponses is the gateway reached over HTTP, except that every charge takes
// effect and then its response is lost. It counts the refunds asked of it.
type lostChargeResponses struct {
	*provider.Gateway
	refunds *atomic.Int32
}

func (g lostChargeResponses) Charge(ctx context.Context, key string, user int64, amount wallet.Money, currency, source string) (string, error) {
	if _, err := g.Gateway.Charge(ctx, key, user, amount, currency, source); err != nil {
		return "", err
	}
	return "", wallet.RetryableError("unavailable", errors.New("charged, then the response was lost"))
}

func (g lostChargeResponses) RefundByKey(ctx context.Context, key, chargeKey string) error {
	g.refunds.Add(1)
	return g.Gateway.RefundByKey(ctx, key, chargeKey)
}

func newLostChargeEnv(t *testing.T) (*env, *atomic.Int32) {
	t.Helper()
	refunds := new(atomic.Int32)
	p := simtest.Start(t, nil, providersim.Options{})
	e := newEnv(t, envOptions{prov: p, gateway: lostChargeResponses{p.Gateway, refunds}})
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
	require.Equal(t, "unavailable", op.Error.Code, "the window ran out on the remote party's last failure")
	require.Contains(t, op.Error.Message, "gave up after")
	require.Equal(t, []string{"charge/forward/failed", "charge/compensate/done"}, stepStatuses(op))
	charges := e.prov.Charges(t)
	require.Len(t, charges, 1, "one charge")
	require.Equal(t, providersim.ChargeRefunded, charges[0].Status)
	require.Equal(t, saga.StepKey(op.ProviderKeyPrefix, "charge")+saga.CompensateSuffix, charges[0].RefundKey)
	require.Greater(t, charges[0].Attempts, 1, "the charge was asked again, with the same key, for the whole window")
	require.Equal(t, op.Steps[0].Attempts, charges[0].Attempts, "every attempt replayed the same charge")
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
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 10000, Source: providersim.DeclinedSource})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Failed, op.State)
	require.Equal(t, "declined", op.Error.Code)
	require.Equal(t, []string{"charge/forward/failed"}, stepStatuses(op))
	require.Zero(t, refunds.Load(), "no refund call")
	charges := e.prov.Charges(t)
	require.Len(t, charges, 1)
	require.Equal(t, providersim.ChargeDeclined, charges[0].Status)
	require.Empty(t, charges[0].RefundKey)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
}

// lostOrderResponses is the merchant reached over HTTP, except that PlaceOrder fails
// without a response: after placing the order (placed) or before reaching the merchant
// (!placed).
type lostOrderResponses struct {
	*provider.Merchant
	placed bool
}

func (m lostOrderResponses) PlaceOrder(ctx context.Context, key, merchant, reference string, amount wallet.Money, currency string) (string, error) {
	if m.placed {
		if _, err := m.Merchant.PlaceOrder(ctx, key, merchant, reference, amount, currency); err != nil {
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
	p := simtest.Start(t, nil, providersim.Options{})
	e := newEnv(t, envOptions{prov: p, merchant: lostOrderResponses{p.Merchant, true}})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "o-1"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.NeedsAttention, op.State)
	require.Equal(t, saga.CodeCompensationFailed, op.Error.Code)
	require.Contains(t, op.Error.Message, wallet.CodeNotCancellable)
	require.Equal(t, []string{"debit/forward/done", "place_order/forward/failed", "place_order/compensate/failed"}, stepStatuses(op))
	orders := p.Orders(t)
	require.Len(t, orders, 1)
	require.Equal(t, providersim.OrderPlaced, orders[0].Status)
	require.Equal(t, wallet.Money(7000), e.balance(t, u), "paid for the order that stands")
	e.checkInvariants(t, u)
}

// The merchant never got the order: cancelling by key finds nothing, voids the key, and the
// wallet is refunded.
func TestPurchaseWithUnreachableMerchantRefunds(t *testing.T) {
	t.Parallel()
	p := simtest.Start(t, nil, providersim.Options{})
	e := newEnv(t, envOptions{prov: p, merchant: lostOrderResponses{p.Merchant, false}})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "o-2"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, "unavailable", op.Error.Code, "the window ran out on the remote party's last failure")
	require.Contains(t, op.Error.Message, "gave up after")
	require.Equal(t, []string{"debit/forward/done", "place_order/forward/failed", "place_order/compensate/done", "debit/compensate/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	e.checkInvariants(t, u)

	// The order arriving late at the merchant is rejected.
	_, err = p.Merchant.PlaceOrder(e.ctx, saga.StepKey(op.ProviderKeyPrefix, "place_order"), "shop", "o-2", 3000, "CNY")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, "rejected", code)
	require.Zero(t, p.OrdersIn(t, providersim.OrderPlaced))
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
	p := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(pool, eng, p.Gateway, p.Merchant, wallet.Options{Logger: log, Steps: steps})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, eng.Recovery().Start(ctx))
	defer func() { require.NoError(t, eng.Recovery().Stop(context.Background())) }()
	e := &env{pool: pool, eng: eng, svc: svc, ctx: ctx, prov: p}
	u := e.user(t)
	e.fund(t, u, 100000)

	p.SetOutage(t, providersim.TargetGateway, providersim.OutageFail, 2*time.Second)
	p.SetOutage(t, providersim.TargetMerchant, providersim.OutageTimeout, 2*time.Second)
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
	var completed, retried int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sagas WHERE id = ANY($1) AND state = 'completed'),
		(SELECT count(*) FROM sagas s, jsonb_array_elements(s.history) e WHERE s.id = ANY($1) AND (e->>'attempts')::int > 1)`, ids).
		Scan(&completed, &retried))
	require.Equal(t, 20, completed, "every saga completed")
	require.Positive(t, retried, "the outage was met")
	require.Equal(t, 11, p.ChargesIn(t, providersim.ChargeCharged))
	require.Equal(t, 10, p.OrdersIn(t, providersim.OrderPlaced))
	require.Equal(t, wallet.Money(100000+10*100-10*50), e.balance(t, u))
	e.checkInvariants(t, u)
}
