package wallet

import (
	"context"
	"errors"
	"fmt"

	"github.com/walletsaga/walletsaga/internal/saga"
)

// PaymentGateway charges and refunds a user's payment source. Both calls are idempotent per
// key: a repeated call with a key already used returns the first call's result. Errors are
// classified with RemoteError; an unclassified error is taken as retryable.
type PaymentGateway interface {
	// Charge takes amount from source and returns the gateway's charge id. A declined source
	// is a permanent RemoteError with code "declined".
	Charge(ctx context.Context, key string, userID int64, amount Money, currency, source string) (chargeID string, err error)
	// Refund gives a charge back. Refunding a refunded charge succeeds; an unknown charge is
	// a permanent RemoteError with code "unknown_charge".
	Refund(ctx context.Context, key, chargeID string) error
}

// Merchant takes orders paid from wallets. PlaceOrder is idempotent per key; a rejected order
// is a permanent RemoteError with code "rejected".
type Merchant interface {
	PlaceOrder(ctx context.Context, key, merchant, reference string, amount Money, currency string) (orderID string, err error)
}

// RemoteError is a failure reported by a remote party, classified for the saga engine:
// permanent (compensate now) or retryable (try again after a backoff).
type RemoteError struct {
	Code      string // machine-readable: "declined", "rejected", "unavailable", …
	Permanent bool
	Err       error
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
// fail with its code, anything else (timeouts, unclassified errors) is retry.
func remoteOutcome(err error) saga.Outcome {
	if err == nil {
		return saga.Done()
	}
	if code, ok := IsPermanent(err); ok {
		return saga.Fail(code, err)
	}
	return saga.Retry(err)
}
