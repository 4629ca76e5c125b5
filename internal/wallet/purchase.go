package wallet

import (
	"context"
	"strconv"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// KindPurchase is the purchase saga: debit the wallet, place the order with the merchant.
const KindPurchase = "purchase"

// stepPlaceOrder is the purchase's remote step (a step name is stored state: see sagas.go).
const stepPlaceOrder = "place_order"

// PurchaseRequest asks to pay a merchant from a wallet.
type PurchaseRequest struct {
	UserID         int64
	Amount         Money
	Merchant       string
	Reference      string
	IdempotencyKey string // optional
	// Background returns once the saga is started; it runs on in the background.
	Background bool
}

func (r PurchaseRequest) normalize() (PurchaseRequest, error) {
	if err := ValidateID("user id", r.UserID); err != nil {
		return r, err
	}
	if err := ValidateAmount("amount", r.Amount); err != nil {
		return r, err
	}
	if err := validateText("merchant", r.Merchant, 100); err != nil {
		return r, err
	}
	if err := validateText("reference", r.Reference, 100); err != nil {
		return r, err
	}
	return r, validateKey(r.IdempotencyKey)
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

// Purchase runs a purchase saga, as Deposit does. Errors as for Deposit; insufficient funds
// is not an error here but the saga's outcome (failed, insufficient_funds), decided in its
// first commit.
func (s *Service) Purchase(ctx context.Context, r PurchaseRequest) (Operation, error) {
	r, err := r.normalize()
	if err != nil {
		return Operation{}, err
	}
	hash := requestHash(KindPurchase, strconv.FormatInt(r.UserID, 10), strconv.FormatInt(int64(r.Amount), 10), r.Merchant, r.Reference)
	return s.start(ctx, r.UserID, r.IdempotencyKey, hash, r.Background, func(ctx context.Context) (any, operationRow, error) {
		currency, _, err := s.currencyOf(ctx, r.UserID)
		if err != nil {
			return nil, operationRow{}, err
		}
		in := purchaseInput{UserID: r.UserID, Amount: r.Amount, Currency: currency, Merchant: r.Merchant, Reference: r.Reference}
		return in, operationRow{Kind: KindPurchase, UserID: r.UserID, Amount: r.Amount, Currency: currency, Merchant: r.Merchant, Reference: r.Reference}, nil
	})
}

// purchase: debit the wallet (local; insufficient funds fails the saga with nothing to
// undo) → place the order (remote). Compensation of the debit: refund the wallet, a balance
// change with its own event.
//
// An unanswered PlaceOrder is asked again with the same key (the merchant's status query)
// for the whole retry window. Only when the window is exhausted does the engine compensate
// place_order itself: cancel the order by its key. If the merchant had no order, the key is
// cancelled (a late PlaceOrder is rejected) and the wallet is refunded. If the order stands
// and cannot be cancelled, the compensation fails for good and the saga goes to
// needs_attention with the wallet still debited: the purchase may well have happened, and
// only an operator can tell; the money is neither lost nor refunded twice.
var purchase = sagaKind{
	Name:   KindPurchase,
	Events: []walletevent.Kind{walletevent.Purchase, walletevent.Refund},
	Define: func(p parties) saga.Definition {
		return saga.Definition{Kind: KindPurchase, Steps: []saga.Step{
			{
				Name: stepDebit,
				Do: balanceStep(p, stepDebit, func(in purchaseInput) Change {
					return Change{UserID: in.UserID, Amount: -in.Amount, Kind: walletevent.Purchase}
				}),
				Compensate: balanceStep(p, ledgerRefund, func(in purchaseInput) Change {
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
					orderID, err := p.merchant.PlaceOrder(ctx, key, in.Merchant, in.Reference, in.Amount, in.Currency)
					if err != nil {
						return remoteOutcome(err)
					}
					if err := s.SetData(purchaseData{OrderID: orderID}); err != nil {
						return saga.Retry(err)
					}
					return saga.Done()
				}),
				Compensate: saga.Remote(func(ctx context.Context, key string, s *saga.Instance) saga.Outcome {
					return remoteOutcome(p.merchant.CancelOrder(ctx, key, saga.StepKey(s.KeyPrefix, stepPlaceOrder)))
				}),
			},
		}}
	},
}
