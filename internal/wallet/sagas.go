package wallet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// The step names, which are also the ledger's step labels (a compensation's label is the
// step name + its suffix). They are part of stored state: renaming one breaks running sagas.
const (
	stepCharge     = "charge"
	stepCredit     = "credit"
	stepDebit      = "debit"
	stepPlaceOrder = "place_order"

	ledgerRefund   = "debit:refund"
	ledgerReversal = "debit:reversal"
)

// Failure codes the wallet's steps give (others come from the remote parties).
const (
	CodeInsufficientFunds = "insufficient_funds"
	CodeBalanceOverflow   = "balance_overflow"
	CodeInvalidInput      = "invalid_input"
)

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

// purchaseInput is a purchase saga's input, as stored.
type purchaseInput struct {
	UserID    int64  `json:"user_id"`
	Amount    Money  `json:"amount"`
	Currency  string `json:"currency"`
	Merchant  string `json:"merchant"`
	Reference string `json:"reference"`
}

// purchaseData is what the purchase saga remembers.
type purchaseData struct {
	OrderID string `json:"order_id,omitempty"`
}

// transferInput is a transfer saga's input, as stored.
type transferInput struct {
	From     int64  `json:"from"`
	To       int64  `json:"to"`
	Amount   Money  `json:"amount"`
	Currency string `json:"currency"`
}

// StepTuning is passed to every definition; zero fields take the engine's defaults.
type StepTuning struct {
	// Window is how long a remote step whose outcome is uncertain is asked again (same
	// key) before it is compensated; compensations get as long before an operator is needed.
	Window                  time.Duration
	AttemptTimeout          time.Duration
	BackoffBase, BackoffMax time.Duration
}

// Kinds returns the saga kinds this package registers (the wallet's sagas).
func Kinds() []string { return []string{KindDeposit, KindPurchase, KindTransfer} }

// Definitions returns the deposit, purchase and transfer saga definitions, calling gw and m
// for their remote steps.
func Definitions(gw PaymentGateway, m Merchant, t StepTuning) []saga.Definition {
	tune := func(d saga.Definition) saga.Definition {
		d.Window, d.AttemptTimeout, d.BackoffBase, d.BackoffMax = t.Window, t.AttemptTimeout, t.BackoffBase, t.BackoffMax
		d.Classify = classifyChange
		return d
	}
	return []saga.Definition{
		tune(depositDefinition(gw)),
		tune(purchaseDefinition(m)),
		tune(transferDefinition()),
	}
}

// depositDefinition: charge the payment source (remote) → credit the wallet (local).
// Compensation: refund the charge, by its idempotency key; it runs when the credit fails,
// and when the charge itself ran out of attempts (it may have happened). A declined charge
// is not refunded: the saga fails.
func depositDefinition(gw PaymentGateway) saga.Definition {
	return saga.Definition{Kind: KindDeposit, Steps: []saga.Step{
		{
			Name: stepCharge,
			Do: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
				var in depositInput
				if o, ok := decodeInput(s, &in); !ok {
					return o
				}
				chargeID, err := gw.Charge(ctx, key, in.UserID, in.Amount, in.Currency, in.Source)
				if err != nil {
					return remoteOutcome(err)
				}
				if err := s.SetData(depositData{ChargeID: chargeID}); err != nil {
					return saga.Retry(err)
				}
				return saga.Done()
			}),
			// By the charge's key, not its id: the engine also runs this after the charge ran
			// out of attempts, when a charge may exist whose id never reached us (and if none
			// does, the refund voids the key so a late charge cannot land).
			Compensate: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
				return remoteOutcome(gw.RefundByKey(ctx, key, saga.StepKey(s.ID, stepCharge)))
			}),
		},
		{
			Name: stepCredit,
			Do: balanceStep(stepCredit, func(in depositInput) Change {
				return Change{UserID: in.UserID, Amount: in.Amount, Kind: walletevent.Deposit}
			}),
		},
	}}
}

// purchaseDefinition: debit the wallet (local; insufficient funds fails the saga with
// nothing to undo) → place the order (remote). Compensation of the debit: refund the wallet,
// a balance change with its own event.
//
// An unanswered PlaceOrder is asked again with the same key (the merchant's status query)
// for the whole retry window. Only when the window is exhausted does the engine compensate
// place_order itself: cancel the order by its key. If the merchant had no order, the key is
// cancelled (a late PlaceOrder is rejected) and the wallet is refunded. If the order stands
// and cannot be cancelled, the compensation fails for good and the saga goes to
// needs_attention with the wallet still debited: the purchase may well have happened, and
// only an operator can tell; the money is neither lost nor refunded twice.
func purchaseDefinition(m Merchant) saga.Definition {
	return saga.Definition{Kind: KindPurchase, Steps: []saga.Step{
		{
			Name: stepDebit,
			Do: balanceStep(stepDebit, func(in purchaseInput) Change {
				return Change{UserID: in.UserID, Amount: -in.Amount, Kind: walletevent.Purchase}
			}),
			Compensate: balanceStep(ledgerRefund, func(in purchaseInput) Change {
				return Change{UserID: in.UserID, Amount: in.Amount, Kind: walletevent.Refund}
			}),
		},
		{
			Name: stepPlaceOrder,
			Do: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
				var in purchaseInput
				if o, ok := decodeInput(s, &in); !ok {
					return o
				}
				orderID, err := m.PlaceOrder(ctx, key, in.Merchant, in.Reference, in.Amount, in.Currency)
				if err != nil {
					return remoteOutcome(err)
				}
				if err := s.SetData(purchaseData{OrderID: orderID}); err != nil {
					return saga.Retry(err)
				}
				return saga.Done()
			}),
			Compensate: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
				return remoteOutcome(m.CancelOrder(ctx, key, saga.StepKey(s.ID, stepPlaceOrder)))
			}),
		},
	}}
}

// transferDefinition: debit the payer (transfer_out) → credit the payee (transfer_in).
// Compensation of the debit: credit the payer back (reversal). Both steps are local, so the
// whole transfer is one commit; the debit first locks both wallets in user-id order, so two
// opposite transfers cannot deadlock.
func transferDefinition() saga.Definition {
	return saga.Definition{Kind: KindTransfer, Steps: []saga.Step{
		{
			Name: stepDebit,
			Do: balanceStep(stepDebit, func(in transferInput) Change {
				return Change{UserID: in.From, Amount: -in.Amount, Kind: walletevent.TransferOut, LockFirst: []int64{in.From, in.To}}
			}),
			Compensate: balanceStep(ledgerReversal, func(in transferInput) Change {
				return Change{UserID: in.From, Amount: in.Amount, Kind: walletevent.Reversal}
			}),
		},
		{
			Name: stepCredit,
			Do: balanceStep(stepCredit, func(in transferInput) Change {
				return Change{UserID: in.To, Amount: in.Amount, Kind: walletevent.TransferIn}
			}),
		},
	}}
}

// balanceStep is a local step that applies one balance change, derived from the saga's
// input by change (which sets UserID, Amount and Kind), as ledger step name step: one
// statement in the commit that records the step (see QueueChange).
func balanceStep[In any](step string, change func(in In) Change) saga.Action {
	return saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
		var in In
		if o, ok := decodeInput(s, &in); !ok {
			return o
		}
		c := change(in)
		c.SagaID, c.Step = s.ID, step
		QueueChange(b, c, nil)
		return saga.Done()
	})
}

// decodeInput decodes a saga's input; a broken input fails the step for good.
func decodeInput(s *saga.Instance, v any) (saga.Outcome, bool) {
	if err := json.Unmarshal(s.Input, v); err != nil {
		return saga.Fail(CodeInvalidInput, fmt.Errorf("saga %d input: %w", s.ID, err)), false
	}
	return saga.Outcome{}, true
}

// classifyChange says what the failure of a balance change's statement means (the
// Definition's Classify): a change that had already been applied is done; a refusal is a
// definite failure with its code; anything else is not recognised (retry).
func classifyChange(err error) (saga.Outcome, bool) {
	err = changeError(err)
	switch {
	case err == nil:
		return saga.Done(), true
	case errors.Is(err, ErrInsufficientFunds):
		return saga.Fail(CodeInsufficientFunds, errors.New("insufficient funds")), true
	case errors.Is(err, ErrBalanceOverflow):
		return saga.Fail(CodeBalanceOverflow, errors.New("the balance would exceed its maximum")), true
	}
	return saga.Outcome{}, false
}
