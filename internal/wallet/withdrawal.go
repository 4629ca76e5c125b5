package wallet

import (
	"context"
	"strconv"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// KindWithdrawal is the withdrawal saga: debit the wallet, pay the money out to the user's
// bank account.
const KindWithdrawal = "withdrawal"

// stepPayout is the withdrawal's remote step (a step name is stored state: see sagas.go).
const stepPayout = "payout"

// WithdrawalRequest asks to pay money out of a wallet to a bank account.
type WithdrawalRequest struct {
	UserID int64
	Amount Money
	// Destination names the bank account (a reference the user gave; free text).
	Destination    string
	IdempotencyKey string // optional
	// Background returns once the saga is started; it runs on in the background.
	Background bool
}

func (r WithdrawalRequest) normalize() (WithdrawalRequest, error) {
	if err := ValidateID("user id", r.UserID); err != nil {
		return r, err
	}
	if err := ValidateAmount("amount", r.Amount); err != nil {
		return r, err
	}
	if err := validateText("destination", r.Destination, 100); err != nil {
		return r, err
	}
	return r, validateKey(r.IdempotencyKey)
}

// withdrawalInput is a withdrawal saga's input, as stored.
type withdrawalInput struct {
	UserID      int64  `json:"user_id"`
	Amount      Money  `json:"amount"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
}

// withdrawalData is what the withdrawal saga remembers.
type withdrawalData struct {
	PayoutID string `json:"payout_id,omitempty"`
}

// Withdraw runs a withdrawal saga, as Deposit does. Errors as for Purchase: insufficient
// funds is the saga's outcome (failed, insufficient_funds), decided in its first commit.
func (s *Service) Withdraw(ctx context.Context, r WithdrawalRequest) (Operation, error) {
	r, err := r.normalize()
	if err != nil {
		return Operation{}, err
	}
	hash := requestHash(KindWithdrawal, strconv.FormatInt(r.UserID, 10), strconv.FormatInt(int64(r.Amount), 10), r.Destination)
	return s.start(ctx, r.UserID, r.IdempotencyKey, hash, r.Background, func(ctx context.Context) (any, operationRow, error) {
		currency, _, err := s.currencyOf(ctx, r.UserID)
		if err != nil {
			return nil, operationRow{}, err
		}
		in := withdrawalInput{UserID: r.UserID, Amount: r.Amount, Currency: currency, Destination: r.Destination}
		return in, operationRow{Kind: KindWithdrawal, UserID: r.UserID, Amount: r.Amount, Currency: currency, Destination: r.Destination}, nil
	})
}

// withdrawal: debit the wallet (local; insufficient funds fails the saga with nothing to
// undo) → pay out through the gateway (remote). Compensation of the debit: refund the
// wallet, a balance change with its own event (withdrawal_refund) and SMS.
//
// A payout the bank refuses is a definite outcome: the wallet is refunded at once. An
// unanswered Payout is asked again with the same key for the whole retry window; only then
// is the payout itself compensated, cancelled by its key: with no payout under the key, the
// key is voided (a late Payout is rejected) and the wallet refunded. A payout whose money
// has left cannot be cancelled: the saga goes to needs_attention with the wallet debited,
// as the withdrawal did happen; only an operator can settle it.
var withdrawal = sagaKind{
	Name:   KindWithdrawal,
	Events: []walletevent.Kind{walletevent.Withdrawal, walletevent.WithdrawalRefund},
	Define: func(p parties) saga.Definition {
		return saga.Definition{Kind: KindWithdrawal, Steps: []saga.Step{
			{
				Name: stepDebit,
				Do: balanceStep(p, stepDebit, func(in withdrawalInput) Change {
					return Change{UserID: in.UserID, Amount: -in.Amount, Kind: walletevent.Withdrawal}
				}),
				Compensate: balanceStep(p, ledgerRefund, func(in withdrawalInput) Change {
					return Change{UserID: in.UserID, Amount: in.Amount, Kind: walletevent.WithdrawalRefund}
				}),
			},
			{
				Name: stepPayout,
				Do: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
					var in withdrawalInput
					if o, ok := decodeInput(s, &in); !ok {
						return o
					}
					payoutID, err := p.gateway.Payout(ctx, key, in.UserID, in.Amount, in.Currency, in.Destination)
					if err != nil {
						return remoteOutcome(err)
					}
					if err := s.SetData(withdrawalData{PayoutID: payoutID}); err != nil {
						return saga.Retry(err)
					}
					return saga.Done()
				}),
				Compensate: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
					return remoteOutcome(p.gateway.CancelPayout(ctx, key, saga.StepKey(s.KeyPrefix, stepPayout)))
				}),
			},
		}}
	},
}
