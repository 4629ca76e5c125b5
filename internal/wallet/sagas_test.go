package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// kinds returns a user's event kinds in seq order.
func (e *env) kinds(t *testing.T, user int64) []walletevent.Kind {
	t.Helper()
	evs, err := e.svc.ListEvents(e.ctx, user, wallet.EventFilter{})
	require.NoError(t, err)
	var ks []walletevent.Kind
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq)
		ks = append(ks, ev.Kind)
	}
	return ks
}

func stepStatuses(op wallet.Operation) []string {
	var s []string
	for _, r := range op.Steps {
		s = append(s, r.Name+"/"+r.Phase+"/"+r.Status)
	}
	return s
}

func TestDepositCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 10000})
	require.NoError(t, err)
	require.Equal(t, wallet.KindDeposit, op.Kind)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State)
	require.Nil(t, op.Error)
	require.Equal(t, []string{"charge/forward/done", "credit/forward/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit}, e.kinds(t, u))
	require.Equal(t, 1, e.prov.ChargesIn(t, providersim.ChargeCharged))
	e.checkInvariants(t, u)
}

func TestDepositDeclinedFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 10000, Source: providersim.DeclinedSource})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Failed, op.State)
	require.NotNil(t, op.Error)
	require.Equal(t, "declined", op.Error.Code)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
	require.Empty(t, e.kinds(t, u))
	e.checkInvariants(t, u)
}

// A credit that cannot apply (the balance would overflow) compensates: the charge is
// refunded at the gateway. The request-time check would refuse such a deposit; here the
// wallet is full when the saga starts (as when a concurrent credit filled it after the
// check), and the credit step's own check, under the row lock, holds.
func TestDepositCreditFailureRefundsCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	_, err := e.pool.Exec(e.ctx, `UPDATE wallets SET balance = $2 WHERE user_id = $1`, u, int64(math.MaxInt64-10))
	require.NoError(t, err)
	s := e.startDirect(t, wallet.KindDeposit, map[string]any{"user_id": u, "amount": 100, "currency": "CNY", "source": "card"})
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, wallet.CodeBalanceOverflow, s.Error.Code)
	charges := e.prov.Charges(t)
	require.Len(t, charges, 1)
	require.Equal(t, providersim.ChargeRefunded, charges[0].Status)
	require.Equal(t, wallet.Money(math.MaxInt64-10), e.balance(t, u))
}

func TestPurchaseCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 5000, Merchant: "shop", Reference: "order-1"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State)
	require.Equal(t, wallet.Money(5000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Purchase}, e.kinds(t, u))
	e.checkInvariants(t, u)
}

func TestPurchaseInsufficientFundsFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 100)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 101, Merchant: "shop", Reference: "r"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Failed, op.State)
	require.Equal(t, wallet.CodeInsufficientFunds, op.Error.Code)
	require.Equal(t, wallet.Money(100), e.balance(t, u))
	require.Empty(t, e.prov.Orders(t), "no order placed")
	e.checkInvariants(t, u)
}

func TestPurchaseRejectedRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "reject-42"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, "rejected", op.Error.Code)
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Purchase, walletevent.Refund}, e.kinds(t, u))
	require.Contains(t, stepStatuses(op), "debit/compensate/done")
	e.checkInvariants(t, u)
}

func TestPurchaseFlakyCompletesAfterRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 3000, Merchant: "shop", Reference: "flaky-7"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State)
	require.Equal(t, 3, op.Steps[len(op.Steps)-1].Attempts)
	orders := e.prov.Orders(t)
	require.Len(t, orders, 1)
	require.Equal(t, 3, orders[0].Attempts)
	require.Equal(t, providersim.OrderPlaced, orders[0].Status)
	require.Equal(t, wallet.Money(7000), e.balance(t, u))
	e.checkInvariants(t, u)
}

func TestTransferCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a, b := e.user(t), e.user(t)
	e.fund(t, a, 10000)
	op, err := e.svc.Transfer(e.ctx, wallet.TransferRequest{From: a, To: b, Amount: 2500})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State)
	require.Equal(t, b, op.CounterpartyID)
	require.Equal(t, wallet.Money(7500), e.balance(t, a))
	require.Equal(t, wallet.Money(2500), e.balance(t, b))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.TransferOut}, e.kinds(t, a))
	require.Equal(t, []walletevent.Kind{walletevent.TransferIn}, e.kinds(t, b))
	e.checkInvariants(t, a)
	e.checkInvariants(t, b)
}

// As for deposits: the payee's wallet is full when the transfer starts, the credit refuses,
// and the payer is credited back, all in the transfer's one commit.
func TestTransferCreditFailureReverses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a, b := e.user(t), e.user(t)
	e.fund(t, a, 10000)
	_, err := e.pool.Exec(e.ctx, `UPDATE wallets SET balance = $2 WHERE user_id = $1`, b, int64(math.MaxInt64-1))
	require.NoError(t, err)
	s := e.startDirect(t, wallet.KindTransfer, map[string]any{"from": a, "to": b, "amount": 2500, "currency": "CNY"})
	require.Equal(t, saga.Compensated, s.State)
	require.Equal(t, wallet.CodeBalanceOverflow, s.Error.Code)
	require.Equal(t, wallet.Money(10000), e.balance(t, a))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.TransferOut, walletevent.Reversal}, e.kinds(t, a))
	e.checkInvariants(t, a)
}

// A deposit or transfer that would take the receiver's balance beyond MaxBalance is refused
// at request time with balance_overflow, before any saga, charge or idempotency key exists;
// up to the limit is fine.
func TestCreditThatWouldOverflowIsRefusedUpFront(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	a, b := e.user(t), e.user(t)
	_, err := e.pool.Exec(e.ctx, `UPDATE wallets SET balance = $2 WHERE user_id = $1`, b, int64(wallet.MaxBalance-5))
	require.NoError(t, err)

	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: b, Amount: 6, IdempotencyKey: "dep-over"})
	require.Equal(t, apperr.BalanceOverflow, apperr.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "at most 9223372036854775807 minor units (92233720368547758.07 CNY)")
	require.ErrorContains(t, err, "can take at most 5 more")
	_, err = e.svc.Transfer(e.ctx, wallet.TransferRequest{From: a, To: b, Amount: 6, IdempotencyKey: "tr-over"})
	require.Equal(t, apperr.BalanceOverflow, apperr.CodeOf(err), "%v", err)
	var sagas, keys int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT (SELECT count(*) FROM sagas), (SELECT count(*) FROM idempotency_keys)`).Scan(&sagas, &keys))
	require.Zero(t, sagas+keys+len(e.prov.Charges(t)), "nothing started, charged or claimed")

	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: b, Amount: 5})
	require.NoError(t, err, "a deposit that fills the wallet exactly fits")
}

func TestTransferValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	a := e.user(t)
	_, err := e.svc.Transfer(e.ctx, wallet.TransferRequest{From: a, To: a, Amount: 1})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	_, err = e.svc.Transfer(e.ctx, wallet.TransferRequest{From: a, To: a + 1000, Amount: 1})
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: a, Amount: wallet.MaxAmount + 1})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	var n int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM sagas`).Scan(&n))
	require.Zero(t, n)
}

func TestIdempotencyReplayAndConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u, v := e.user(t), e.user(t)
	req := wallet.DepositRequest{UserID: u, Amount: 500, IdempotencyKey: "dep-1"}
	first, err := e.svc.Deposit(e.ctx, req)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	again, err := e.svc.Deposit(e.ctx, req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.ID, again.ID)

	// Same key, other body → unprocessable; same key, other operation → unprocessable.
	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 501, IdempotencyKey: "dep-1"})
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err))
	_, err = e.svc.Purchase(e.ctx, wallet.PurchaseRequest{UserID: u, Amount: 500, Merchant: "m", Reference: "r", IdempotencyKey: "dep-1"})
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err))

	// Keys are per user: v may use the same key.
	other, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: v, Amount: 500, IdempotencyKey: "dep-1"})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)

	e.wait(t, first.ID)
	e.wait(t, other.ID)
	require.Equal(t, wallet.Money(500), e.balance(t, u), "credited once")
	var sagas int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM sagas`).Scan(&sagas))
	require.Equal(t, 2, sagas)
}

// Concurrent requests with one key start one saga.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	const n = 10
	ids := make(chan int64, n)
	var failures atomic.Int32
	done := make(chan struct{})
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 700, IdempotencyKey: "same"})
			if err != nil {
				failures.Add(1)
				return
			}
			ids <- op.ID
		}()
	}
	for range n {
		<-done
	}
	close(ids)
	require.Zero(t, failures.Load())
	var first int64
	for id := range ids {
		if first == 0 {
			first = id
		}
		require.Equal(t, first, id)
	}
}

// failingGateway always fails retryably: the deposit runs out of attempts.
type failingGateway struct{}

func (failingGateway) Charge(context.Context, string, int64, wallet.Money, string, string) (string, error) {
	return "", wallet.RetryableError("unavailable", errors.New("down"))
}

func (failingGateway) RefundByKey(context.Context, string, string) error { return nil }

func (failingGateway) Payout(context.Context, string, int64, wallet.Money, string, string) (string, error) {
	return "", wallet.RetryableError("unavailable", errors.New("down"))
}

func (failingGateway) CancelPayout(context.Context, string, string) error { return nil }

// The charge ran out of attempts without a definite outcome, so the engine refunds it by
// key (here: nothing to refund) and the deposit ends compensated rather than failed.
func TestDepositGatewayDownCompensatesAfterRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{gateway: failingGateway{}})
	u := e.user(t)
	op, err := e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 100})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, "unavailable", op.Error.Code, "the window ran out on the remote party's last failure")
	require.Contains(t, op.Error.Message, "gave up after")
	require.Greater(t, op.Steps[0].Attempts, 1, "asked again for the whole window")
	require.Equal(t, []string{"charge/forward/failed", "charge/compensate/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(0), e.balance(t, u))
}

// chargeThenHang charges through the gateway and then hangs until its context ends, as a
// runner that dies after the gateway charged but before the outcome was recorded.
type chargeThenHang struct {
	*provider.Gateway
	charged chan struct{}
}

func (g chargeThenHang) Charge(ctx context.Context, key string, user int64, amount wallet.Money, currency, source string) (string, error) {
	if _, err := g.Gateway.Charge(ctx, key, user, amount, currency, source); err != nil {
		return "", err
	}
	close(g.charged)
	<-ctx.Done()
	return "", ctx.Err()
}

// A runner stopped mid-step (after the remote charge, before recording it): another
// engine resumes the saga from the database with the same idempotency key once the lease
// expires, so the user is charged once and credited once.
func TestDepositResumesAfterRunnerStopsMidStep(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := simtest.Start(t, nil, providersim.Options{})
	sim, m := p.Gateway, p.Merchant
	hang := chargeThenHang{Gateway: sim, charged: make(chan struct{})}

	engA := testEngine(pool, "a", log)
	svcA, err := wallet.NewService(pool, engA, hang, m, wallet.Options{Logger: log, Steps: fastSteps})
	require.NoError(t, err)
	engB := testEngine(pool, "b", log)
	svcB, err := wallet.NewService(pool, engB, sim, m, wallet.Options{Logger: log, Steps: fastSteps})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, _, err := svcA.CreateUser(ctx, wallet.NewUser{Name: "u", Phone: "+8613800138000"})
	require.NoError(t, err)
	op, err := svcA.Deposit(ctx, wallet.DepositRequest{UserID: u.ID, Amount: 4200, Background: true})
	require.NoError(t, err)
	select {
	case <-hang.charged:
	case <-ctx.Done():
		t.Fatal("runner A never charged")
	}
	require.NoError(t, engA.Recovery().Stop(ctx)) // runner A stops with the charge made and not recorded

	require.NoError(t, engB.Recovery().Start(ctx))
	defer func() { require.NoError(t, engB.Recovery().Stop(context.Background())) }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	op, err = svcB.WaitSaga(wctx, op.ID)
	require.NoError(t, err)
	require.Equal(t, saga.Completed, op.State)
	require.Equal(t, 2, op.Steps[0].Attempts)

	charges := p.Charges(t)
	require.Len(t, charges, 1, "charged once")
	require.Equal(t, 2, charges[0].Attempts, "the second runner replayed the same key")
	w, err := svcB.GetWallet(ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, wallet.Money(4200), w.Balance, "credited once")
}

// With a gateway and merchant that fail a third of their calls (half of those after doing
// the work), every saga still completes, and each charge and order happens once.
func TestUnreliableRemotesStayExactlyOnce(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := simtest.Start(t, nil, providersim.Options{FailureRate: 0.33})
	eng := testEngine(pool, "", log)
	steps := fastSteps
	steps.Window = 20 * time.Second
	svc, err := wallet.NewService(pool, eng, p.Gateway, p.Merchant, wallet.Options{Logger: log, Steps: steps})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, eng.Recovery().Start(ctx))
	defer func() { require.NoError(t, eng.Recovery().Stop(context.Background())) }()
	e := &env{pool: pool, eng: eng, svc: svc, ctx: ctx}

	u := e.user(t)
	var ids []int64
	for range 20 {
		op, err := svc.Deposit(ctx, wallet.DepositRequest{UserID: u, Amount: 100})
		require.NoError(t, err)
		ids = append(ids, op.ID)
	}
	e.waitTerminal(t, ids)
	for i := range 10 {
		op, err := svc.Purchase(ctx, wallet.PurchaseRequest{UserID: u, Amount: 50, Merchant: "m", Reference: fmt.Sprintf("o-%d", i)})
		require.NoError(t, err)
		ids = append(ids, op.ID)
	}
	e.waitTerminal(t, ids)
	var completed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM sagas WHERE state = 'completed'`).Scan(&completed))
	require.Equal(t, 30, completed)
	require.Equal(t, 20, p.ChargesIn(t, providersim.ChargeCharged))
	require.Equal(t, 10, p.OrdersIn(t, providersim.OrderPlaced))
	require.Equal(t, wallet.Money(20*100-10*50), e.balance(t, u))
	e.checkInvariants(t, u)
}

// slowCharge charges through the gateway, then holds its answer until released: a runner
// whose call outlives its lease.
type slowCharge struct {
	*provider.Gateway
	charged, release chan struct{}
}

func (g slowCharge) Charge(ctx context.Context, key string, user int64, amount wallet.Money, currency, source string) (string, error) {
	id, err := g.Gateway.Charge(ctx, key, user, amount, currency, source)
	close(g.charged)
	<-g.release
	return id, err
}

// A deposit whose charge outlives the runner's lease: another replica's recovery takes the
// saga over, asks the gateway again with the same key and credits the wallet; the first
// runner's late success is refused by the fence. One charge, one credit.
func TestStolenLeaseCreditsOnce(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := simtest.Start(t, nil, providersim.Options{})
	sim, m := p.Gateway, p.Merchant
	slow := slowCharge{Gateway: sim, charged: make(chan struct{}), release: make(chan struct{})}
	steps := fastSteps
	steps.AttemptTimeout = 500 * time.Millisecond
	engA := saga.New(pool, saga.Options{Owner: "a", Lease: time.Second, PollInterval: 50 * time.Millisecond, Logger: log})
	svcA, err := wallet.NewService(pool, engA, slow, m, wallet.Options{Logger: log, Steps: steps})
	require.NoError(t, err)
	engB := saga.New(pool, saga.Options{Owner: "b", Lease: time.Second, PollInterval: 50 * time.Millisecond, Logger: log})
	svcB, err := wallet.NewService(pool, engB, sim, m, wallet.Options{Logger: log, Steps: steps})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() {
		cancel()
		require.NoError(t, errors.Join(engA.Recovery().Stop(context.Background()), engB.Recovery().Stop(context.Background())))
	}()

	u, _, err := svcA.CreateUser(ctx, wallet.NewUser{Name: "u", Phone: "+8613800138000"})
	require.NoError(t, err)
	type result struct {
		op  wallet.Operation
		err error
	}
	first := make(chan result, 1)
	go func() {
		op, err := svcA.Deposit(ctx, wallet.DepositRequest{UserID: u.ID, Amount: 700})
		first <- result{op, err}
	}()
	<-slow.charged
	require.NoError(t, engB.Recovery().Start(ctx)) // the other replica's recovery, once the lease expires
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM sagas`).Scan(&id))
	op, err := svcB.WaitSaga(ctx, id)
	require.NoError(t, err)
	require.Equal(t, saga.Completed, op.State)
	close(slow.release)
	r := <-first
	require.NoError(t, r.err)
	require.Equal(t, saga.Running, r.op.State, "the late runner's commit was refused: it answers with what it last committed")

	charges := p.Charges(t)
	require.Len(t, charges, 1, "charged once")
	require.Equal(t, 2, charges[0].Attempts, "the second runner asked with the same key")
	w, err := svcB.GetWallet(ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, wallet.Money(700), w.Balance, "credited once")
	var ledger int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries`).Scan(&ledger))
	require.Equal(t, 1, ledger)
}

// A retried request is answered with its original saga even when the wallet could no
// longer take it: the Idempotency-Key decides before the balance check does.
func TestReplayWinsOverTheBalanceCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	req := wallet.DepositRequest{UserID: u, Amount: 500, IdempotencyKey: "dep-full"}
	first, err := e.svc.Deposit(e.ctx, req)
	require.NoError(t, err)
	require.Equal(t, saga.Completed, first.State)
	_, err = e.pool.Exec(e.ctx, `UPDATE wallets SET balance = $2 WHERE user_id = $1`, u, int64(wallet.MaxBalance-10))
	require.NoError(t, err)
	again, err := e.svc.Deposit(e.ctx, req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.ID, again.ID)
	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 500, IdempotencyKey: "dep-new"})
	require.Equal(t, apperr.BalanceOverflow, apperr.CodeOf(err), "%v", err)
}
