package provider

import (
	"context"
	"fmt"

	"github.com/walletsaga/walletsaga/internal/wallet"
)

// Gateway is a payment gateway reached over HTTP: wallet.PaymentGateway on the contract.
type Gateway struct{ c *client }

// NewGateway returns a gateway adapter for the provider at o.URL.
func NewGateway(o Options) (*Gateway, error) {
	c, err := newClient(o)
	if err != nil {
		return nil, err
	}
	return &Gateway{c: c}, nil
}

// Charge implements wallet.PaymentGateway: POST /v1/charges.
func (g *Gateway) Charge(ctx context.Context, key string, userID int64, amount wallet.Money, currency, source string) (string, error) {
	var out Charge
	err := g.c.post(ctx, PathCharges, key, ChargeRequest{UserID: userID, Amount: int64(amount), Currency: currency, Source: source}, &out)
	if err != nil {
		return "", err
	}
	if out.ChargeID == "" || (out.Status != ChargeCharged && out.Status != ChargeRefunded) {
		return "", badShape(PathCharges, out)
	}
	return out.ChargeID, nil
}

// RefundByKey implements wallet.PaymentGateway: POST /v1/refunds.
func (g *Gateway) RefundByKey(ctx context.Context, key, chargeKey string) error {
	var out Refund
	if err := g.c.post(ctx, PathRefunds, key, RefundRequest{ChargeKey: chargeKey}, &out); err != nil {
		return err
	}
	switch out.Status {
	case RefundRefunded, RefundVoided, RefundNothingToDo:
		return nil
	}
	return badShape(PathRefunds, out)
}

// Payout implements wallet.PaymentGateway: POST /v1/payouts.
func (g *Gateway) Payout(ctx context.Context, key string, userID int64, amount wallet.Money, currency, destination string) (string, error) {
	var out Payout
	err := g.c.post(ctx, PathPayouts, key, PayoutRequest{UserID: userID, Amount: int64(amount), Currency: currency, Destination: destination}, &out)
	if err != nil {
		return "", err
	}
	if out.PayoutID == "" || out.Status != PayoutPaid {
		return "", badShape(PathPayouts, out)
	}
	return out.PayoutID, nil
}

// CancelPayout implements wallet.PaymentGateway: POST /v1/payout-cancellations.
func (g *Gateway) CancelPayout(ctx context.Context, key, payoutKey string) error {
	var out PayoutCancellation
	if err := g.c.post(ctx, PathPayoutCancellations, key, PayoutCancellationRequest{PayoutKey: payoutKey}, &out); err != nil {
		return err
	}
	switch out.Status {
	case CancelCancelled, CancelVoided, CancelNothingToDo:
		return nil
	}
	return badShape(PathPayoutCancellations, out)
}

// Merchant is a merchant reached over HTTP: wallet.Merchant on the contract.
type Merchant struct{ c *client }

// NewMerchant returns a merchant adapter for the provider at o.URL.
func NewMerchant(o Options) (*Merchant, error) {
	c, err := newClient(o)
	if err != nil {
		return nil, err
	}
	return &Merchant{c: c}, nil
}

// PlaceOrder implements wallet.Merchant: POST /v1/orders.
func (m *Merchant) PlaceOrder(ctx context.Context, key, merchant, reference string, amount wallet.Money, currency string) (string, error) {
	var out Order
	err := m.c.post(ctx, PathOrders, key, OrderRequest{Merchant: merchant, Reference: reference, Amount: int64(amount), Currency: currency}, &out)
	if err != nil {
		return "", err
	}
	if out.OrderID == "" || out.Status != OrderPlaced {
		return "", badShape(PathOrders, out)
	}
	return out.OrderID, nil
}

// CancelOrder implements wallet.Merchant: POST /v1/order-cancellations.
func (m *Merchant) CancelOrder(ctx context.Context, key, orderKey string) error {
	var out Cancellation
	if err := m.c.post(ctx, PathOrderCancellations, key, CancellationRequest{OrderKey: orderKey}, &out); err != nil {
		return err
	}
	switch out.Status {
	case CancelCancelled, CancelVoided, CancelNothingToDo:
		return nil
	}
	return badShape(PathOrderCancellations, out)
}

// badShape is a 200 whose JSON decoded but is not the documented answer: the call's
// outcome is unknown, so it is retryable.
func badShape(path string, got any) error {
	return wallet.RetryableError(CodeBadResponse, fmt.Errorf("provider: %s: 200 whose body is not the documented answer: %+v", path, got))
}
