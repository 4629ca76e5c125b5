// Package notify turns wallet events into SMS: the texts per event kind and locale, the
// senders (log, webhook) and their failure switches, and the SMS log read API and page.
// The ordering gate (internal/ordering) decides WHEN an SMS may be sent; this package decides
// WHAT is sent and HOW.
package notify

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// SMS is one text message to one user for one balance change.
type SMS struct {
	UserID int64
	Seq    int64
	Phone  string // E.164
	Locale string // "zh-CN" or "en"
	Kind   string // walletevent.Kind
	Amount int64  // signed minor units of the event (for the failure switch)
	Text   string
	// IdempotencyKey is "user:seq": a provider that sees it twice sends once.
	IdempotencyKey string
	// Late marks an operator replay of an SMS that was dead-lettered.
	Late bool
}

// ErrPermanent marks a send failure that retrying cannot fix (a provider's 4xx): the gate
// dead-letters the message at once. Wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("notify: permanent send failure")

// ErrAlreadyDelivered means the provider has this SMS already under its idempotency key (a
// 409 to a repeated key): it counts as delivered.
var ErrAlreadyDelivered = errors.New("notify: the provider already has this SMS")

// ErrProviderUnavailable marks a failure of the provider as a whole rather than of one SMS:
// a 5xx, 408 or 429, a timeout, a refused or broken connection. It is retried like any
// failure, and the provider breaker counts it.
var ErrProviderUnavailable = errors.New("notify: SMS provider unavailable")

// Sender delivers one SMS. tx is the gate's transaction, which also records the SMS as sent
// and advances the user's progress: a sender that writes to the database (the log sender)
// does so in tx, so its SMS exists exactly once; a remote sender ignores tx and relies on the
// idempotency key. An error wrapping ErrPermanent is not retried; any other is.
type Sender interface {
	Send(ctx context.Context, tx pgx.Tx, m SMS) error
}
