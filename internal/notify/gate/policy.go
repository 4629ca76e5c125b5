// The retry policy: what a failed send becomes.

package gate

import (
	"errors"
	"fmt"
	"time"

	"github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/notify"
)

// RetryPolicy is the one retry policy of SMS delivery: how long a failed SMS waits before its
// next attempt, and when it is given up and dead-lettered.
type RetryPolicy struct {
	// Base is the wait after the first failed attempt; each further failure doubles it, up to
	// Max.
	Base, Max time.Duration
	// MaxAttempts and DeadLetterAfter must BOTH be reached before an SMS is dead-lettered:
	// at least MaxAttempts attempts, the first of them at least DeadLetterAfter ago. So a
	// burst of failures never dead-letters an SMS early, and a slow trickle never retries
	// it for ever.
	MaxAttempts     int
	DeadLetterAfter time.Duration
}

// DefaultRetryPolicy is the production policy: 1 s doubling to 5 min, dead-lettered after 8
// attempts and 15 minutes.
var DefaultRetryPolicy = RetryPolicy{Base: time.Second, Max: 5 * time.Minute, MaxAttempts: 8, DeadLetterAfter: 15 * time.Minute}

// Validate names the first setting that cannot work.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Base <= 0:
		return fmt.Errorf("retry base must be positive, got %s", p.Base)
	case p.Max < p.Base:
		return fmt.Errorf("retry max (%s) must not be below the retry base (%s)", p.Max, p.Base)
	case p.MaxAttempts < 1:
		return fmt.Errorf("max attempts must be at least 1, got %d", p.MaxAttempts)
	case p.DeadLetterAfter < 0:
		return fmt.Errorf("dead-letter window must not be negative, got %s", p.DeadLetterAfter)
	}
	return nil
}

// Backoff is the wait after the n-th failed attempt (n ≥ 1): the project's one backoff
// (internal/backoff) from Base to Max — Base·2^(n-1) capped at Max, half of it drawn at
// random, so retries of SMS that failed together spread out. jitter(k) returns a number in
// [0, k).
func (p RetryPolicy) Backoff(n int, jitter func(int64) int64) time.Duration {
	return backoff.Policy{Base: p.Base, Max: p.Max}.Delay(n, jitter)
}

// Verdict is what becomes of an SMS after one attempt.
type Verdict string

// The verdicts.
const (
	Sent         Verdict = "sent"          // the provider has it: record it sent, take the next
	Retry        Verdict = "retry"         // failed, attempts spent: try again after a backoff
	DeadLettered Verdict = "dead_lettered" // given up: record it, publish it to the DLQ, take the next
	Postponed    Verdict = "postponed"     // held back by the provider breaker: no attempt spent
	// Skipped is an operator's verdict on a seq that never arrived: recorded
	// skipped_by_operator, and the user moves past it.
	Skipped Verdict = "skipped_by_operator"
)

// finishes reports whether an SMS recorded with v is finished: the user moves past it.
func (v Verdict) finishes() bool {
	switch v {
	case Sent, DeadLettered, Skipped, verdictAdvance:
		return true
	}
	return false
}

// Attempt is one delivery attempt of a user's head SMS, as the lane saw it.
type Attempt struct {
	// Prior is how many attempts were spent on the SMS before this one.
	Prior int
	// Age is how long ago its first attempt was (0 for the first), measured on the database's
	// clock plus this process's monotonic clock — never the one against the other.
	Age time.Duration
	// Err is what the sender returned; nil means the provider accepted the SMS.
	Err error
	// Held is non-zero when the failure must not spend an attempt: the provider breaker was
	// not closed (open, or this was its probe). The SMS then waits Held.
	Held time.Duration
}

// Decision is the policy's answer for one attempt.
type Decision struct {
	Verdict Verdict
	// Attempts is the count of attempts spent after this one.
	Attempts int
	// Delay is, for Retry and Postponed, how long until the SMS is due again.
	Delay time.Duration
	// Reason says why an SMS was dead-lettered, or what the last failure was.
	Reason string
}

// Decide applies the policy to one attempt. It is pure: jitter(k) returns a number in [0, k).
//
//   - accepted, or notify.ErrAlreadyDelivered (the provider had it already under the same key): Sent;
//   - notify.ErrPermanent: DeadLettered at once;
//   - held back by the breaker: Postponed for Held, no attempt spent;
//   - any other failure: Retry after Backoff, or DeadLettered once both MaxAttempts and
//     DeadLetterAfter are reached. notify.ErrInProgress (a 409: the provider has not finished
//     a send under the key) is one of them, never Sent: the SMS is asked for again under the
//     same key, as after a timeout, and the provider delivers it once.
//
// A failure that carries the provider's Retry-After (notify.RetryAfter) waits at least that
// long, Retry or Postponed, but never longer than Max: a provider asking for an hour is asked
// again after the policy's longest backoff.
func (p RetryPolicy) Decide(a Attempt, jitter func(int64) int64) Decision {
	n := a.Prior + 1
	switch {
	case a.Err == nil || errors.Is(a.Err, notify.ErrAlreadyDelivered):
		return Decision{Verdict: Sent, Attempts: n}
	case errors.Is(a.Err, notify.ErrPermanent):
		return Decision{Verdict: DeadLettered, Attempts: n, Reason: "permanent failure: " + a.Err.Error()}
	case a.Held > 0:
		return Decision{Verdict: Postponed, Attempts: a.Prior, Delay: p.atLeastAsked(a.Held, a.Err), Reason: a.Err.Error()}
	case n >= p.MaxAttempts && a.Age >= p.DeadLetterAfter:
		return Decision{Verdict: DeadLettered, Attempts: n,
			Reason: fmt.Sprintf("gave up after %d attempts over %s: %s", n, a.Age.Round(time.Millisecond), a.Err)}
	}
	return Decision{Verdict: Retry, Attempts: n, Delay: p.atLeastAsked(p.Backoff(n, jitter), a.Err), Reason: a.Err.Error()}
}

// atLeastAsked is delay, or the wait err's provider asked for (its Retry-After) when that is
// longer, at most Max.
func (p RetryPolicy) atLeastAsked(delay time.Duration, err error) time.Duration {
	return max(delay, min(notify.RetryAfter(err), p.Max))
}
