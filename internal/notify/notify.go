// Package notify turns wallet events into SMS: the texts per event kind and locale, the
// senders (log, webhook) and their failure switches, and the SMS log read API and page.
// It also holds the notifier's delivery: the inbox the orderly consumer writes into, the
// per-user lanes that send from it in order (the gate rule: an SMS goes out only after its
// predecessor is recorded sent or dead-lettered), the one retry policy, the provider breaker,
// and the dead letters published to the DLQ topic. Every SQL statement on the notifier's
// tables is in this package.
package notify

import (
	"context"
	"errors"
	"time"
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
	// IdempotencyKey is the SMS's ProviderKey, "<deployment>:<user>:<seq>": a provider that
	// sees it twice sends once.
	IdempotencyKey string
	// Late marks an operator replay of an SMS that was dead-lettered.
	Late bool
	// OccurredAt is when the wallet committed the balance change (the event's occurred_at):
	// where the commit→SMS latency starts.
	OccurredAt time.Time
}

// ErrPermanent marks a send failure that retrying cannot fix (a provider's 4xx): the SMS is
// dead-lettered at once. Wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("notify: permanent send failure")

// ErrAlreadyDelivered means the provider has this SMS already under its idempotency key (a
// 409 to a repeated key): it counts as delivered.
var ErrAlreadyDelivered = errors.New("notify: the provider already has this SMS")

// ErrProviderUnavailable marks a failure of the provider as a whole rather than of one SMS:
// a 5xx, 408 or 429, a timeout, a refused or broken connection. It is retried like any
// failure, and the provider breaker counts it.
var ErrProviderUnavailable = errors.New("notify: SMS provider unavailable")

// Sender delivers one SMS to a provider, which deduplicates on m.IdempotencyKey (its
// ProviderKey): sending the same SMS again delivers it once. Errors: ErrAlreadyDelivered (delivered
// before), ErrPermanent (retrying cannot help), ErrProviderUnavailable (the provider is
// failing), anything else (this SMS failed; retry). The lanes call Send for one user at a
// time, in seq order, and only once the user's previous SMS is recorded.
type Sender interface {
	Send(ctx context.Context, m SMS) error
}
