package providersim

import (
	"context"
	"time"
)

// A charge's statuses, as stored.
const (
	ChargeCharged  = "charged"
	ChargeDeclined = "declined"
	ChargeRefunded = "refunded"
	ChargeVoided   = "voided" // a refund found no charge under the key and voided it
)

// An order's statuses, as stored.
const (
	OrderPlaced    = "placed"
	OrderRejected  = "rejected"
	OrderPending   = "pending"   // a flaky- order that has not failed often enough yet
	OrderCancelled = "cancelled" // cancelled while pending
	OrderVoided    = "voided"    // a cancellation found no order under the key and voided it
)

// A payout's statuses, as stored.
const (
	PayoutPaid      = "paid"
	PayoutRejected  = "rejected"
	PayoutPending   = "pending"   // a flaky- payout that has not failed often enough yet
	PayoutCancelled = "cancelled" // cancelled while pending
	PayoutVoided    = "voided"    // a cancellation found no payout under the key and voided it
)

// Charge is what the gateway holds under one idempotency key.
type Charge struct {
	Key       string
	ID        string
	UserID    int64
	Amount    int64
	Currency  string
	Source    string
	Status    string
	RefundKey string // the key of the refund that refunded or voided it
	Attempts  int    // calls with the key, the first included
	CreatedAt time.Time
}

// Order is what the merchant holds under one idempotency key.
type Order struct {
	Key       string
	ID        string
	Merchant  string
	Reference string
	Amount    int64
	Currency  string
	Status    string
	CancelKey string // the key of the cancellation that cancelled or voided it
	Attempts  int
	CreatedAt time.Time
}

// Payout is what the gateway holds under one payout's idempotency key.
type Payout struct {
	Key         string
	ID          string
	UserID      int64
	Amount      int64
	Currency    string
	Destination string
	Status      string
	CancelKey   string // the key of the cancellation that cancelled or voided it
	Attempts    int
	CreatedAt   time.Time
}

// Store keeps the simulator's charges, orders and payouts, one per idempotency key. Each method is
// atomic: concurrent calls with one key see one record. Two implementations: MemoryStore
// and PostgresStore (its own schema and migrations); both pass the same test suite.
type Store interface {
	// Charge stores c under c.Key unless the key holds a charge already, and counts the
	// attempt either way; it returns what the key holds now.
	Charge(ctx context.Context, c Charge) (Charge, error)
	// Refund refunds the charge under chargeKey when it is charged (recording refundKey), or,
	// when the key holds nothing, stores a voided charge with voidID under it. Declined,
	// refunded and voided charges stay as they are. It returns what the key holds now.
	Refund(ctx context.Context, chargeKey, refundKey, voidID string) (Charge, error)
	// PlaceOrder stores o under o.Key unless the key holds an order already, and counts the
	// attempt either way; a pending order whose attempts now exceed pendingAttempts is
	// placed. It returns what the key holds now.
	PlaceOrder(ctx context.Context, o Order, pendingAttempts int) (Order, error)
	// CancelOrder cancels the order under orderKey when it is pending (recording
	// cancelKey), or, when the key holds nothing, stores a voided order with voidID under
	// it. Placed, rejected, cancelled and voided orders stay as they are. It returns what
	// the key holds now.
	CancelOrder(ctx context.Context, orderKey, cancelKey, voidID string) (Order, error)
	// Payout stores p under p.Key unless the key holds a payout already, and counts the
	// attempt either way; a pending payout whose attempts now exceed pendingAttempts is
	// paid. It returns what the key holds now.
	Payout(ctx context.Context, p Payout, pendingAttempts int) (Payout, error)
	// CancelPayout cancels the payout under payoutKey when it is pending (recording
	// cancelKey), or, when the key holds nothing, stores a voided payout with voidID under
	// it. Paid, rejected, cancelled and voided payouts stay as they are. It returns what the
	// key holds now.
	CancelPayout(ctx context.Context, payoutKey, cancelKey, voidID string) (Payout, error)
	// Charges, Orders and Payouts list everything held, oldest first (for tests and audits).
	Charges(ctx context.Context) ([]Charge, error)
	Orders(ctx context.Context) ([]Order, error)
	Payouts(ctx context.Context) ([]Payout, error)
}
