// Package provider is the payment gateway and merchant contract as JSON over HTTP (the
// OpenAPI document in openapi.yaml is its description) and the adapters that implement
// wallet.PaymentGateway (charges and payouts) and wallet.Merchant (orders) against it.
//
// Every operation is a POST of a JSON body carrying an Idempotency-Key header and a bearer
// token; its undo is a POST that names the original call's key. The adapters make one HTTP
// request per call, bounded by a per-call timeout, and classify what comes back into
// wallet.RemoteError: permanent (a documented refusal, with its code) or retryable
// (anything uncertain). They never retry by themselves: asking again, with the same key,
// after a backoff, is the saga engine's durable job.
package provider

import _ "embed"

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the contract's OpenAPI 3 document (the provider side).
func OpenAPI() []byte { return openAPI }

// The contract's paths.
const (
	PathCharges             = "/v1/charges"
	PathRefunds             = "/v1/refunds"
	PathOrders              = "/v1/orders"
	PathOrderCancellations  = "/v1/order-cancellations"
	PathPayouts             = "/v1/payouts"
	PathPayoutCancellations = "/v1/payout-cancellations"
)

// HeaderIdempotencyKey carries the call's idempotency key.
const HeaderIdempotencyKey = "Idempotency-Key"

// The error codes of definite refusals (4xx answers with an error body). Every one is
// permanent: the call did not take effect and never will with this key.
const (
	CodeDeclined            = "declined"             // 402: the source was declined, or the charge key was voided by a refund
	CodeRejected            = "rejected"             // 422: the merchant refused the order or the bank the payout, or the key was voided by a cancellation
	CodeNotCancellable      = "not_cancellable"      // 422: the order or payout stands and can no longer be cancelled
	CodeIdempotencyMismatch = "idempotency_mismatch" // 422: the key was used before with other parameters
	CodeInvalidRequest      = "invalid_request"      // 400: the body or a header is not as documented
	CodeUnauthorized        = "unauthorized"         // 401: no or wrong bearer token
)

// Codes of retryable failures, as the adapters report them.
const (
	CodeUnavailable = "unavailable"  // 5xx, a connection error, a response lost on the way
	CodeTimeout     = "timeout"      // no answer within the per-call timeout, or 408
	CodeRateLimited = "rate_limited" // 429
	CodeInProgress  = "in_progress"  // 409: a call with the same key is still being processed
	CodeBadResponse = "bad_response" // a 2xx whose body is not the documented JSON, or a status the contract does not name
)

// ChargeRequest is the body of POST /v1/charges.
type ChargeRequest struct {
	UserID   int64  `json:"user_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Source   string `json:"source"`
}

// The statuses of a charge in a 200 answer to POST /v1/charges.
const (
	ChargeCharged  = "charged"
	ChargeRefunded = "refunded" // charged, then refunded by its key: asked again, it is still that charge
)

// Charge is the 200 answer to POST /v1/charges: the charge made with the key.
type Charge struct {
	ChargeID string `json:"charge_id"`
	Status   string `json:"status"`
}

// RefundRequest is the body of POST /v1/refunds: refund the charge made with ChargeKey.
type RefundRequest struct {
	ChargeKey string `json:"charge_key"`
}

// The statuses of a 200 answer to POST /v1/refunds, /v1/order-cancellations (and
// /v1/payout-cancellations) and /v1/orders.
const (
	RefundRefunded    = "refunded"          // the charge is refunded (now or before)
	RefundVoided      = "voided"            // no charge was made with the key: the key is void, a late charge with it is declined
	RefundNothingToDo = "nothing_to_refund" // the charge was declined: no money was taken
	CancelCancelled   = "cancelled"         // the order is cancelled (now or before)
	CancelVoided      = "voided"            // no order was placed with the key: the key is void, a late order with it is rejected
	CancelNothingToDo = "nothing_to_cancel" // the order was rejected: nothing stands
	OrderPlaced       = "placed"            // the status of a 200 answer to POST /v1/orders
)

// Refund is the 200 answer to POST /v1/refunds.
type Refund struct {
	ChargeKey string `json:"charge_key"`
	Status    string `json:"status"`
}

// OrderRequest is the body of POST /v1/orders.
type OrderRequest struct {
	Merchant  string `json:"merchant"`
	Reference string `json:"reference"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
}

// Order is the 200 answer to POST /v1/orders: the order placed with the key.
type Order struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
}

// CancellationRequest is the body of POST /v1/order-cancellations: cancel the order placed
// with OrderKey.
type CancellationRequest struct {
	OrderKey string `json:"order_key"`
}

// Cancellation is the 200 answer to POST /v1/order-cancellations.
type Cancellation struct {
	OrderKey string `json:"order_key"`
	Status   string `json:"status"`
}

// PayoutRequest is the body of POST /v1/payouts: pay amount out of the user's wallet to
// the bank account Destination names.
type PayoutRequest struct {
	UserID      int64  `json:"user_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
}

// PayoutPaid is the status of a 200 answer to POST /v1/payouts.
const PayoutPaid = "paid"

// Payout is the 200 answer to POST /v1/payouts: the payout made with the key.
type Payout struct {
	PayoutID string `json:"payout_id"`
	Status   string `json:"status"`
}

// PayoutCancellationRequest is the body of POST /v1/payout-cancellations: cancel the
// payout made with PayoutKey.
type PayoutCancellationRequest struct {
	PayoutKey string `json:"payout_key"`
}

// PayoutCancellation is the 200 answer to POST /v1/payout-cancellations; its status is
// one of an order cancellation's (CancelCancelled, CancelVoided, CancelNothingToDo).
type PayoutCancellation struct {
	PayoutKey string `json:"payout_key"`
	Status    string `json:"status"`
}

// ErrorBody is the body of every error answer: {"error":{"code","message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error's code and human-readable message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
