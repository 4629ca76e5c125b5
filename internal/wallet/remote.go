package wallet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walletsaga/walletsaga/internal/saga"
)

// PaymentGateway charges and refunds a user's payment source, and pays money out to a
// user's bank account. Every call is idempotent per key: a repeated call with a key already
// used returns the first call's result. Errors are classified with RemoteError; an
// unclassified error is taken as retryable.
type PaymentGateway interface {
	// Charge takes amount from source and returns the gateway's charge id. A declined source
	// is a permanent RemoteError with code "declined"; so is a chargeKey already voided by
	// RefundByKey.
	Charge(ctx context.Context, key string, userID int64, amount Money, currency, source string) (chargeID string, err error)
	// RefundByKey gives back the charge made with chargeKey (the key Charge was called with),
	// so that a charge whose response was lost can be refunded without its id. It succeeds
	// with nothing to do when there is nothing to give back: no charge was made with
	// chargeKey (the key is then voided, so that a Charge with it arriving late is declined),
	// the charge was declined, or it is refunded already.
	RefundByKey(ctx context.Context, key, chargeKey string) error
	// Payout pays amount out to the bank account destination names and returns the
	// gateway's payout id. A refused payout is a permanent RemoteError with code "rejected";
	// so is a payoutKey cancelled by CancelPayout.
	Payout(ctx context.Context, key string, userID int64, amount Money, currency, destination string) (payoutID string, err error)
	// CancelPayout cancels the payout made with payoutKey (the key Payout was called with).
	// It succeeds with nothing to do when no payout was made with payoutKey (the key is then
	// cancelled, so that a Payout with it arriving late is rejected) or the payout was
	// refused or cancelled already. A payout the gateway can no longer cancel (the money
	// left) is a permanent RemoteError with code CodeNotCancellable.
	CancelPayout(ctx context.Context, key, payoutKey string) error
}

// Merchant takes orders paid from wallets. Both calls are idempotent per key.
type Merchant interface {
	// PlaceOrder places an order and returns the merchant's order id. A rejected order is a
	// permanent RemoteError with code "rejected"; so is an orderKey cancelled by CancelOrder.
	PlaceOrder(ctx context.Context, key, merchant, reference string, amount Money, currency string) (orderID string, err error)
	// CancelOrder cancels the order placed with orderKey (the key PlaceOrder was called with).
	// It succeeds with nothing to do when no order was placed with orderKey (the key is then
	// cancelled, so that a PlaceOrder with it arriving late is rejected) or the order was
	// rejected or cancelled already. An order the merchant can no longer cancel is a
	// permanent RemoteError with code CodeNotCancellable.
	CancelOrder(ctx context.Context, key, orderKey string) error
}

// CodeNotCancellable is the code of a CancelOrder or CancelPayout refused because the order
// or the payout stands.
const CodeNotCancellable = "not_cancellable"

// RemoteError is a failure reported by a remote party, classified for the saga engine:
// permanent (compensate now) or retryable (try again after a backoff).
type RemoteError struct {
	Code      string // machine-readable: "declined", "rejected", "unavailable", …
	Permanent bool
	Err       error
	// RetryAfter is, for a retryable error, the least the remote party asked to be left
	// alone (an HTTP Retry-After): the saga waits at least this long before asking again.
	RetryAfter time.Duration
}

// Error describes the failure with its code and class.
func (e *RemoteError) Error() string {
	kind := "retryable"
	if e.Permanent {
		kind = "permanent"
	}
	if e.Err != nil {
		return fmt.Sprintf("%s (%s): %v", e.Code, kind, e.Err)
	}
	return fmt.Sprintf("%s (%s)", e.Code, kind)
}

// Unwrap returns the underlying cause.
func (e *RemoteError) Unwrap() error { return e.Err }

// PermanentError returns a RemoteError that no retry will fix.
func PermanentError(code string, err error) error {
	return &RemoteError{Code: code, Permanent: true, Err: err}
}

// RetryableError returns a RemoteError that a later attempt may not meet.
func RetryableError(code string, err error) error {
	return &RemoteError{Code: code, Err: err}
}

// IsPermanent reports whether err is a permanent RemoteError, and its code.
func IsPermanent(err error) (code string, ok bool) {
	var re *RemoteError
	if errors.As(err, &re) && re.Permanent {
		return re.Code, true
	}
	return "", false
}

// remoteOutcome turns a remote call's error into a step outcome: nil is done, permanent is
// fail with its code, anything else (timeouts, unclassified errors) is retry, no sooner
// than the error's RetryAfter. A retryable RemoteError's code goes with the retry: the step
// history records it, and a step whose window runs out fails with it (what its user reads
// is classified from it, see PublicError); an unclassified error has none, and such a step
// fails with saga.CodeAttemptsExhausted.
func remoteOutcome(err error) saga.Outcome {
	if err == nil {
		return saga.Done()
	}
	if code, ok := IsPermanent(err); ok {
		return saga.Fail(code, err)
	}
	var re *RemoteError
	if errors.As(err, &re) {
		o := saga.RetryAfter(err, re.RetryAfter)
		o.Code = re.Code
		return o
	}
	return saga.Retry(err)
}
