// Package notify says what the notifier sends: an SMS — its text for a balance event, per
// kind and locale (Render), and its key at the provider (ProviderKey) — and the contract
// every sender keeps (Sender). The notifier's parts are its subpackages:
//
//   - inbox: consume the broker's messages, then write them to the inbox;
//   - gate: the gate rule (gate.Admit) and the lanes that claim, send and record under it;
//   - deadletters: publish dead letters to the DLQ topic, reconcile it, replay, skip;
//   - senders: the log and webhook senders and the provider breaker;
//   - smslog, httpapi, web: the SMS log as people read it (API, page, CLI);
//   - instance: the claim on a consumer's name.
package notify

import (
	"context"
	"errors"
	"fmt"
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
	// Currency and BalanceAfter are the event's: with Kind and Amount, what a provider's
	// template takes (Template).
	Currency     string
	BalanceAfter int64
	Text         string
	// Epoch is the wallet epoch of the event (0: not said): a seq the wallet handed out again
	// after a restore is another SMS, under another key.
	Epoch int64
	// IdempotencyKey is the SMS's ProviderKey, "<deployment>:<user>:<seq>[:<epoch>]": a
	// provider that sees it twice sends once.
	IdempotencyKey string
	// Late marks an operator replay of an SMS that was dead-lettered.
	Late bool
	// OccurredAt is when the wallet committed the balance change (the event's occurred_at):
	// where the commit→SMS latency starts.
	OccurredAt time.Time
}

// ProviderKey is the idempotency key of (user, seq)'s SMS of the wallet's epoch at the
// provider: "<deployment>:<user>:<seq>:<epoch>", where deployment is the id the notifier's
// tables were created with (notify.deployment, a random UUID), and epoch the wallet's (see
// walletevent.Event.Epoch; an event that says none, from before epochs, has the key
// "<deployment>:<user>:<seq>" it always had). It names one balance event across every
// deployment that shares a provider and every history of the wallet's database (a seq
// handed out again after a restore is another SMS), and stays the same for every send of
// the SMS: a lane's retries, another lane's after a lease passed, an operator's replay.
func ProviderKey(deployment string, userID, seq, epoch int64) string {
	if epoch == 0 {
		return fmt.Sprintf("%s:%d:%d", deployment, userID, seq)
	}
	return fmt.Sprintf("%s:%d:%d:%d", deployment, userID, seq, epoch)
}

// ErrPermanent marks a send failure that retrying cannot fix (a provider's 4xx): the SMS is
// dead-lettered at once. Wrap it: fmt.Errorf("...: %w", ErrPermanent).
var ErrPermanent = errors.New("notify: permanent send failure")

// ErrAlreadyDelivered means the provider has this SMS already under its idempotency key: it
// answered a repeated key with its first answer, marked as a replay (a 2xx with
// Idempotent-Replayed: true). It counts as delivered.
var ErrAlreadyDelivered = errors.New("notify: the provider already has this SMS")

// ErrInProgress means the provider holds a send under this SMS's idempotency key whose
// outcome it does not know yet (a 409): not delivered as far as anyone knows, and never
// counted as delivered. It is retried like any failure, under the same key, so the provider
// delivers the SMS once however many times it is asked; it is not a failure of the provider
// as a whole (the provider answered).
var ErrInProgress = errors.New("notify: the provider is still processing this SMS")

// ErrProviderUnavailable marks a failure of the provider as a whole rather than of one SMS:
// a 5xx, 408 or 429, a timeout, a refused or broken connection. It is retried like any
// failure, and the provider breaker counts it.
var ErrProviderUnavailable = errors.New("notify: SMS provider unavailable")

// RetryAfterError is a failed send whose provider said how long to wait before asking again
// (a Retry-After header): the SMS's next attempt waits at least After (the retry policy
// bounds it by its longest backoff). Make one with RetryLater; read it with RetryAfter.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryLater returns err, asking that the SMS's next attempt wait at least d; err itself when d
// is not positive.
func RetryLater(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &RetryAfterError{Err: err, After: d}
}

// RetryAfter is the least wait err asks for before the SMS's next attempt (RetryLater), 0
// when none.
func RetryAfter(err error) time.Duration {
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return max(ra.After, 0)
	}
	return 0
}

// Sender delivers one SMS to a provider, which deduplicates on m.IdempotencyKey (its
// ProviderKey): sending the same SMS again delivers it once. Errors: ErrAlreadyDelivered (delivered
// before), ErrInProgress (a send under the key is still being processed; retry), ErrPermanent
// (retrying cannot help), ErrProviderUnavailable (the provider is failing), anything else
// (this SMS failed; retry). Any of the retried ones may carry the least wait the provider
// asked for (RetryLater). The lanes call Send for one user at a
// time, in seq order, and only once the user's previous SMS is recorded.
type Sender interface {
	Send(ctx context.Context, m SMS) error
}

// IsJournaled reports whether s delivers by the SMS log row the record of the SMS writes
// (the log sender), rather than by its Send: such a sender reports it with a method
// Journaled() bool that returns true.
func IsJournaled(s Sender) bool {
	j, ok := s.(interface{ Journaled() bool })
	return ok && j.Journaled()
}
