package wallet

import (
	"context"
	"strconv"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// KindDeposit is the deposit saga: charge a payment source, credit the wallet.
const KindDeposit = "deposit"

// stepCharge is the deposit's remote step (a step name is stored state: see sagas.go).
const stepCharge = "charge"

// DefaultSource is the payment source of a deposit that names none.
const DefaultSource = "card"

// DepositRequest asks to top up a wallet from a payment source.
type DepositRequest struct {
	UserID         int64
	Amount         Money
	Source         string // "" means DefaultSource
	IdempotencyKey string // optional
	// Background returns once the saga is started; it runs on in the background.
	Background bool
}

func (r DepositRequest) normalize() (DepositRequest, error) {
	if r.Source == "" {
		r.Source = DefaultSource
	}
	if err := ValidateID("user id", r.UserID); err != nil {
		return r, err
	}
	if err := ValidateAmount("amount", r.Amount); err != nil {
		return r, err
	}
	if err := validateText("source", r.Source, 64); err != nil {
		return r, err
	}
	return r, validateKey(r.IdempotencyKey)
}

// depositInput is a deposit saga's input, as stored.
type depositInput struct {
	UserID   int64  `json:"user_id"`
	Amount   Money  `json:"amount"`
	Currency string `json:"currency"`
	Source   string `json:"source"`
}

// depositData is what the deposit saga remembers between steps.
type depositData struct {
	ChargeID string `json:"charge_id,omitempty"`
}

// Deposit runs a deposit saga: it starts it and, unless r.Background, runs it in the
// caller's goroutine to its end or its first backoff, and returns it as its last commit left
// it (read from nothing but what the commits returned). With r.Background it returns once
// the saga is started, and the saga runs on in the background. Errors: Invalid (bad
// request), NotFound (no such user), Unprocessable (Idempotency-Key reused with another
// request), BalanceOverflow (the wallet cannot hold that much more: see checkCreditFits). An
// Idempotency-Key seen before with the same request returns the original saga as it stands.
func (s *Service) Deposit(ctx context.Context, r DepositRequest) (Operation, error) {
	r, err := r.normalize()
	if err != nil {
		return Operation{}, err
	}
	hash := requestHash(KindDeposit, strconv.FormatInt(r.UserID, 10), strconv.FormatInt(int64(r.Amount), 10), r.Source)
	return s.start(ctx, r.UserID, r.IdempotencyKey, hash, r.Background, func(ctx context.Context) (any, operationRow, error) {
		currency, w, err := s.currencyOf(ctx, r.UserID)
		if err != nil {
			return nil, operationRow{}, err
		}
		if w != nil {
			if err := checkCreditFits(*w, r.Amount); err != nil {
				return nil, operationRow{}, err
			}
		}
		in := depositInput{UserID: r.UserID, Amount: r.Amount, Currency: currency, Source: r.Source}
		return in, operationRow{Kind: KindDeposit, UserID: r.UserID, Amount: r.Amount, Currency: currency, Source: r.Source, Credited: r.UserID}, nil
	})
}

// deposit: charge the payment source (remote) → credit the wallet (local). Compensation:
// refund the charge, by its idempotency key; it runs when the credit fails, and when the
// charge itself ran out of attempts (it may have happened). A declined charge is not
// refunded: the saga fails.
var deposit = sagaKind{
	Name:   KindDeposit,
	Events: []walletevent.Kind{walletevent.Deposit},
	Define: func(p parties) saga.Definition {
		return saga.Definition{Kind: KindDeposit, Steps: []saga.Step{
			{
				Name: stepCharge,
				Do: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
					var in depositInput
					if o, ok := decodeInput(s, &in); !ok {
						return o
					}
					chargeID, err := p.gateway.Charge(ctx, key, in.UserID, in.Amount, in.Currency, in.Source)
					if err != nil {
						return remoteOutcome(err)
					}
					if err := s.SetData(depositData{ChargeID: chargeID}); err != nil {
						return saga.Retry(err)
					}
					return saga.Done()
				}),
				// By the charge's key, not its id: the engine also runs this after the charge
				// ran out of attempts, when a charge may exist whose id never reached us (and if
				// none does, the refund voids the key so a late charge cannot land).
				Compensate: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
					return remoteOutcome(p.gateway.RefundByKey(ctx, key, saga.StepKey(s.KeyPrefix, stepCharge)))
				}),
			},
			{
				Name: stepCredit,
				Do: balanceStep(p, stepCredit, func(in depositInput) Change {
					return Change{UserID: in.UserID, Amount: in.Amount, Kind: walletevent.Deposit}
				}),
			},
		}}
	},
}
