package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// lastEvent returns a user's latest balance event.
func (e *env) lastEvent(t *testing.T, user int64) wallet.Event {
	t.Helper()
	evs, err := e.svc.ListEvents(e.ctx, user, wallet.EventFilter{})
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	return evs[len(evs)-1]
}

func TestWithdrawalCompletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 3000, Destination: "招商银行 6222 0000 1234"})
	require.NoError(t, err)
	require.Equal(t, wallet.KindWithdrawal, op.Kind)
	require.Equal(t, saga.Completed, op.State, "run inline to its end")
	require.Nil(t, op.Error)
	require.Equal(t, "招商银行 6222 0000 1234", op.Destination)
	require.Equal(t, []string{"debit/forward/done", "payout/forward/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(7000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Withdrawal}, e.kinds(t, u))
	ev := e.lastEvent(t, u)
	require.Equal(t, wallet.Money(-3000), ev.Amount)
	require.Equal(t, wallet.Money(7000), ev.BalanceAfter)

	payouts := e.prov.Payouts(t)
	require.Len(t, payouts, 1)
	require.Equal(t, providersim.PayoutPaid, payouts[0].Status)
	require.Equal(t, saga.StepKey(op.ProviderKeyPrefix, "payout"), payouts[0].Key)
	require.Equal(t, "招商银行 6222 0000 1234", payouts[0].Destination)
	require.EqualValues(t, 3000, payouts[0].Amount)
	require.Equal(t, u, payouts[0].UserID)

	got, err := e.svc.GetSaga(e.ctx, op.ID)
	require.NoError(t, err)
	require.Equal(t, "招商银行 6222 0000 1234", got.Destination, "the destination is kept with the saga")
	e.checkInvariants(t, u)
}

// Insufficient funds end the withdrawal in its first commit: failed, nothing to undo, no
// payout asked for.
func TestWithdrawalInsufficientFundsFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 100)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 101, Destination: "bank"})
	require.NoError(t, err)
	require.Equal(t, saga.Failed, op.State)
	require.Equal(t, wallet.CodeInsufficientFunds, op.Error.Code)
	require.Equal(t, []string{"debit/forward/failed"}, stepStatuses(op))
	require.Equal(t, wallet.Money(100), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit}, e.kinds(t, u))
	require.Empty(t, e.prov.Payouts(t), "no payout asked for")
	e.checkInvariants(t, u)
}

// A payout the bank refuses is definite: the wallet is refunded at once, as a balance
// change of its own (withdrawal_refund), whose SMS tells the user.
func TestWithdrawalRefusedRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 3000, Destination: providersim.RejectPrefix + "closed-account"})
	require.NoError(t, err)
	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, provider.CodeRejected, op.Error.Code)
	require.Equal(t, []string{"debit/forward/done", "payout/forward/failed", "debit/compensate/done"}, stepStatuses(op))
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Withdrawal, walletevent.WithdrawalRefund}, e.kinds(t, u))
	refund := e.lastEvent(t, u)
	require.Equal(t, wallet.Money(3000), refund.Amount)
	require.Equal(t, wallet.Money(10000), refund.BalanceAfter)
	require.Equal(t, op.ID, refund.SagaID)
	require.Equal(t, 1, e.prov.PayoutsIn(t, providersim.PayoutRejected))
	require.Zero(t, e.prov.PayoutsIn(t, providersim.PayoutPaid))
	e.checkInvariants(t, u)
}

// A bank that fails twice is asked again with the same key, and pays once.
func TestWithdrawalFlakyPaysAfterRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 3000, Destination: providersim.FlakyPrefix + "bank"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)
	require.Equal(t, saga.Completed, op.State)
	require.Equal(t, 3, op.Steps[len(op.Steps)-1].Attempts)
	payouts := e.prov.Payouts(t)
	require.Len(t, payouts, 1)
	require.Equal(t, 3, payouts[0].Attempts)
	require.Equal(t, providersim.PayoutPaid, payouts[0].Status)
	require.Equal(t, wallet.Money(7000), e.balance(t, u))
	e.checkInvariants(t, u)
}

// lostPayouts is the gateway reached over HTTP, except that Payout never gets an answer:
// it fails after the gateway paid (paid), or before reaching it (!paid). It records the keys
// it was asked with, and the cancellations.
type lostPayouts struct {
	*provider.Gateway
	paid bool

	mu      sync.Mutex
	keys    []string
	cancels []string
}

func (g *lostPayouts) Payout(ctx context.Context, key string, user int64, amount wallet.Money, currency, destination string) (string, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	if g.paid {
		if _, err := g.Gateway.Payout(ctx, key, user, amount, currency, destination); err != nil {
			return "", err
		}
	}
	return "", wallet.RetryableError("unavailable", errors.New("no answer from the gateway"))
}

func (g *lostPayouts) CancelPayout(ctx context.Context, key, payoutKey string) error {
	g.mu.Lock()
	g.cancels = append(g.cancels, key+" "+payoutKey)
	g.mu.Unlock()
	return g.Gateway.CancelPayout(ctx, key, payoutKey)
}

func (g *lostPayouts) asked() (keys, cancels []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.keys...), append([]string(nil), g.cancels...)
}

// The gateway never answers the payout: it is asked again with the same key for the whole
// window, then cancelled by that key (nothing was paid: the key is voided, so the payout
// arriving late is refused) and the wallet refunded, with its SMS event.
func TestWithdrawalUnansweredIsAskedAgainThenCancelledAndRefunded(t *testing.T) {
	t.Parallel()
	p := simtest.Start(t, nil, providersim.Options{})
	gw := &lostPayouts{Gateway: p.Gateway}
	e := newEnv(t, envOptions{prov: p, gateway: gw})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 2500, Destination: "bank"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.Compensated, op.State)
	require.Equal(t, "unavailable", op.Error.Code, "the window ran out on the remote party's last failure")
	require.Contains(t, op.Error.Message, "gave up after")
	require.Equal(t, []string{"debit/forward/done", "payout/forward/failed", "payout/compensate/done", "debit/compensate/done"}, stepStatuses(op))
	keys, cancels := gw.asked()
	require.Greater(t, len(keys), 1, "asked again for the window")
	for _, k := range keys {
		require.Equal(t, saga.StepKey(op.ProviderKeyPrefix, "payout"), k, "every attempt with the same key")
	}
	payoutKey := saga.StepKey(op.ProviderKeyPrefix, "payout")
	require.Equal(t, []string{payoutKey + saga.CompensateSuffix + " " + payoutKey}, cancels, "cancelled once, by the payout's key")
	require.Equal(t, wallet.Money(10000), e.balance(t, u))
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Withdrawal, walletevent.WithdrawalRefund}, e.kinds(t, u))
	e.checkInvariants(t, u)

	_, err = p.Gateway.Payout(e.ctx, saga.StepKey(op.ProviderKeyPrefix, "payout"), u, 2500, "CNY", "bank")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, provider.CodeRejected, code, "the payout arriving late is refused")
	require.Zero(t, p.PayoutsIn(t, providersim.PayoutPaid))
}

// The gateway paid but its answer never came back, and a paid payout cannot be called back:
// once the window is exhausted the withdrawal needs an operator, with the wallet still
// debited (the money did leave), not refunded.
func TestWithdrawalPaidButUnansweredNeedsAttention(t *testing.T) {
	t.Parallel()
	p := simtest.Start(t, nil, providersim.Options{})
	e := newEnv(t, envOptions{prov: p, gateway: &lostPayouts{Gateway: p.Gateway, paid: true}})
	u := e.user(t)
	e.fund(t, u, 10000)
	op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 2500, Destination: "bank"})
	require.NoError(t, err)
	op = e.wait(t, op.ID)

	require.Equal(t, saga.NeedsAttention, op.State)
	require.Equal(t, saga.CodeCompensationFailed, op.Error.Code)
	require.Contains(t, op.Error.Message, wallet.CodeNotCancellable)
	require.Equal(t, []string{"debit/forward/done", "payout/forward/failed", "payout/compensate/failed"}, stepStatuses(op))
	payouts := p.Payouts(t)
	require.Len(t, payouts, 1, "paid once, whatever the attempts")
	require.Equal(t, providersim.PayoutPaid, payouts[0].Status)
	require.Greater(t, payouts[0].Attempts, 1)
	require.Equal(t, wallet.Money(7500), e.balance(t, u), "debited for the payout that left")
	require.Equal(t, []walletevent.Kind{walletevent.Deposit, walletevent.Withdrawal}, e.kinds(t, u))
	e.checkInvariants(t, u)
}

// Withdrawals honour the Idempotency-Key as deposits do: the same request is the same
// saga, concurrent ones included; the key with another body is refused.
func TestWithdrawalIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 10000)
	req := wallet.WithdrawalRequest{UserID: u, Amount: 1000, Destination: "bank", IdempotencyKey: "wd-1"}
	const n = 10
	ids := make(chan int64, n)
	var failures atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			op, err := e.svc.Withdraw(e.ctx, req)
			if err != nil {
				failures.Add(1)
				return
			}
			ids <- op.ID
		})
	}
	wg.Wait()
	close(ids)
	require.Zero(t, failures.Load())
	var first int64
	for id := range ids {
		if first == 0 {
			first = id
		}
		require.Equal(t, first, id, "one saga")
	}
	again, err := e.svc.Withdraw(e.ctx, req)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first, again.ID)

	other := req
	other.Destination = "another bank"
	_, err = e.svc.Withdraw(e.ctx, other)
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err), "%v", err)
	_, err = e.svc.Deposit(e.ctx, wallet.DepositRequest{UserID: u, Amount: 1000, IdempotencyKey: "wd-1"})
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err), "the key with another operation")

	e.wait(t, first)
	require.Equal(t, wallet.Money(9000), e.balance(t, u), "debited once")
	require.Len(t, e.prov.Payouts(t), 1, "paid out once")
}

// Concurrent withdrawals from one wallet never take it below zero: each debit is checked
// under the wallet's row lock, so exactly as many complete as the balance pays for, the
// rest fail with insufficient funds, and only those are paid out.
func TestConcurrentWithdrawalsNeverOverdraw(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.user(t)
	e.fund(t, u, 1000)
	const n = 20
	states := make(chan saga.State, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			op, err := e.svc.Withdraw(e.ctx, wallet.WithdrawalRequest{UserID: u, Amount: 100, Destination: fmt.Sprintf("bank %d", i)})
			if err != nil {
				t.Errorf("withdrawal %d: %v", i, err)
				return
			}
			states <- e.wait(t, op.ID).State
		})
	}
	wg.Wait()
	close(states)
	count := map[saga.State]int{}
	for s := range states {
		count[s]++
	}
	require.Equal(t, map[saga.State]int{saga.Completed: 10, saga.Failed: 10}, count)
	require.Equal(t, wallet.Money(0), e.balance(t, u))
	require.Equal(t, 10, e.prov.PayoutsIn(t, providersim.PayoutPaid))
	require.Len(t, e.prov.Payouts(t), 10, "no payout for a failed debit")
	e.checkInvariants(t, u)
}

func TestWithdrawalValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	u := e.user(t)
	for _, tc := range []struct {
		req  wallet.WithdrawalRequest
		code apperr.Code
		msg  string
	}{
		{wallet.WithdrawalRequest{UserID: u, Amount: 1}, apperr.Invalid, "destination is required"},
		{wallet.WithdrawalRequest{UserID: u, Amount: 0, Destination: "bank"}, apperr.Invalid, "amount"},
		{wallet.WithdrawalRequest{UserID: 0, Amount: 1, Destination: "bank"}, apperr.Invalid, "user id"},
		{wallet.WithdrawalRequest{UserID: u, Amount: 1, Destination: " bank"}, apperr.Invalid, "destination must not start or end with spaces"},
		{wallet.WithdrawalRequest{UserID: u, Amount: 1, Destination: "bank\x00"}, apperr.Invalid, "destination must not contain control characters"},
		{wallet.WithdrawalRequest{UserID: u, Amount: 1, Destination: strings.Repeat("銀", 101)}, apperr.Invalid, "destination must be at most 100 characters"},
		{wallet.WithdrawalRequest{UserID: u, Amount: 1, Destination: "bank", IdempotencyKey: "a b"}, apperr.Invalid, "Idempotency-Key"},
		{wallet.WithdrawalRequest{UserID: u + 1000, Amount: 1, Destination: "bank"}, apperr.NotFound, "not found"},
	} {
		_, err := e.svc.Withdraw(e.ctx, tc.req)
		require.Equal(t, tc.code, apperr.CodeOf(err), "%+v: %v", tc.req, err)
		require.ErrorContains(t, err, tc.msg)
	}
	var n int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM wallet_operations`).Scan(&n))
	require.Zero(t, n)
	require.Empty(t, e.prov.Payouts(t))
}
