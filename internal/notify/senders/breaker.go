package senders

import (
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/walletsaga/walletsaga/internal/notify"
)

// BreakerConfig configures the provider breaker.
type BreakerConfig struct {
	// Failures is how many provider-wide failures in a row, each for a different user, open
	// the breaker.
	Failures int
	// Open is how long it stays open before a probe; each failed probe doubles the pause, up
	// to OpenMax.
	Open, OpenMax time.Duration
	// OnChange, when set, is told of every state change (metrics, logs). It must not call
	// back into the breaker.
	OnChange func(from, to string)
}

// DefaultBreakerConfig holds the breaker's defaults, the one place they are set: NewBreaker
// takes them for what a config leaves zero, and the notifier's settings (SMS_BREAKER_*)
// default to them.
var DefaultBreakerConfig = BreakerConfig{Failures: 5, Open: time.Second, OpenMax: 3 * time.Second}

// BreakerState is what the breaker shows: for /v1/gate, the page and metrics.
type BreakerState struct {
	State string    `json:"state"` // closed | open | half-open
	Since time.Time `json:"since"`
	// Opened counts how often it opened since the process started.
	Opened int64 `json:"opened"`
	// RetryAt is, while open, when the next probe may go.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// LastError is the failure that last opened it.
	LastError string `json:"last_error,omitempty"`
}

// Breaker stops sending while the SMS provider as a whole is failing, so that an outage
// delays SMS instead of spending their attempts. It counts only failures that look
// provider-wide (notify.ErrProviderUnavailable: 5xx, timeouts, refused connections), and counts
// each user once per run of failures: one user whose SMS always fail (a bad number, a
// poisoned account) never opens it, whereas Failures different users failing in a row do.
// Open, it refuses every send; after a pause it lets one probe through (half-open): success
// closes it, failure reopens it for twice the pause, up to OpenMax.
//
// It wraps sony/gobreaker's two-step breaker, which keeps the closed/open/half-open
// machine; this type adds the distinct-user counting and the growing pause.
type Breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	cfg      BreakerConfig
	changed  chan struct{} // closed and replaced at every state change
	mu       sync.Mutex
	streak   map[int64]bool // users with a counted failure since the last success
	holdTill time.Time      // open: no probe before this
	pause    time.Duration  // the current open pause
	since    time.Time
	opened   int64
	lastErr  string
	now      func() time.Time
}

// userFailure carries the user of a failed send to the breaker's classifier.
type userFailure struct {
	user int64
	err  error
}

func (u *userFailure) Error() string { return u.err.Error() }
func (u *userFailure) Unwrap() error { return u.err }

// ErrBreakerOpen is returned by Allow while the breaker holds sends back.
var ErrBreakerOpen = errors.New("notify: SMS provider breaker is open")

// NewBreaker returns a closed breaker. Settings left zero take DefaultBreakerConfig's; an
// OpenMax below Open becomes the default, or Open if that is longer.
func NewBreaker(cfg BreakerConfig) *Breaker {
	d := DefaultBreakerConfig
	if cfg.Failures <= 0 {
		cfg.Failures = d.Failures
	}
	if cfg.Open <= 0 {
		cfg.Open = d.Open
	}
	if cfg.OpenMax < cfg.Open {
		cfg.OpenMax = max(d.OpenMax, cfg.Open)
	}
	b := &Breaker{cfg: cfg, changed: make(chan struct{}), streak: map[int64]bool{}, pause: cfg.Open, now: time.Now}
	b.since = b.now()
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "sms-provider",
		MaxRequests: 1,
		Timeout:     cfg.Open,
		ReadyToTrip: func(c gobreaker.Counts) bool { return int(c.ConsecutiveFailures) >= cfg.Failures },
		// A provider that answers, even "no" (a permanent 4xx), "I have it already" or "still
		// working on it" (a 409), is up.
		IsSuccessful:  answered,
		IsExcluded:    b.excluded,
		OnStateChange: b.onStateChange,
	})
	return b
}

// answered reports whether a send's outcome shows the provider up: it accepted the SMS, or
// answered for it, even "no" (notify.ErrPermanent), "I have it already"
// (notify.ErrAlreadyDelivered) or "still working on it" (notify.ErrInProgress).
func answered(err error) bool {
	return err == nil || errors.Is(err, notify.ErrPermanent) || errors.Is(err, notify.ErrAlreadyDelivered) ||
		errors.Is(err, notify.ErrInProgress)
}

// excluded leaves out of the count what says nothing about the provider as a whole: a
// failure that is not provider-wide, and a second failure of a user already counted in the
// current run. It runs under gobreaker's lock.
func (b *Breaker) excluded(err error) bool {
	if answered(err) {
		return false
	}
	if !errors.Is(err, notify.ErrProviderUnavailable) {
		return true
	}
	var uf *userFailure
	if !errors.As(err, &uf) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streak[uf.user] {
		return true
	}
	b.streak[uf.user] = true
	b.lastErr = uf.err.Error()
	return false
}

// onStateChange runs under gobreaker's lock.
func (b *Breaker) onStateChange(_ string, from, to gobreaker.State) {
	b.mu.Lock()
	now := b.now()
	b.since = now
	clear(b.streak)
	switch {
	case to == gobreaker.StateOpen && from == gobreaker.StateHalfOpen:
		b.pause = min(2*b.pause, b.cfg.OpenMax)
		b.holdTill = now.Add(b.pause)
		b.opened++
	case to == gobreaker.StateOpen:
		b.pause = b.cfg.Open
		b.holdTill = now.Add(b.pause)
		b.opened++
	case to == gobreaker.StateClosed:
		b.pause = b.cfg.Open
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(from.String(), to.String())
	}
}

// Allow asks to send one SMS of user. It returns the function to report the send's outcome
// with (call it exactly once), or ErrBreakerOpen with how long to hold the SMS back.
// counted reports whether a failure of this send spends an attempt: only while the breaker
// is closed; the probe of a half-open breaker spends none.
func (b *Breaker) Allow(user int64) (done func(error), counted bool, hold time.Duration, err error) {
	if wait := b.Wait(); wait > 0 {
		return nil, false, wait, ErrBreakerOpen
	}
	state := b.cb.State()
	report, err := b.cb.Allow()
	if err != nil {
		return nil, false, b.Hold(), ErrBreakerOpen
	}
	return func(err error) {
		if answered(err) {
			b.mu.Lock()
			clear(b.streak)
			b.mu.Unlock()
			report(err)
			return
		}
		report(&userFailure{user: user, err: err})
	}, state == gobreaker.StateClosed, 0, nil
}

// Wait returns how long sends are held back from now: 0 when closed or when a probe may go.
func (b *Breaker) Wait() time.Duration {
	b.mu.Lock()
	till := b.holdTill
	b.mu.Unlock()
	if d := till.Sub(b.now()); d > 0 {
		return d
	}
	return 0
}

// Hold is how long an SMS the breaker held back, or whose send failed while the breaker was
// not closed (a probe, which spends no attempt), waits before it is due again: until the
// next probe may go, and at least the open pause.
func (b *Breaker) Hold() time.Duration { return max(b.Wait(), b.cfg.Open) }

// Changed returns a channel closed at the breaker's next state change.
func (b *Breaker) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// HalfOpen reports whether the breaker is letting a probe through (send one SMS, not many).
func (b *Breaker) HalfOpen() bool { return b.cb.State() == gobreaker.StateHalfOpen }

// State returns what the breaker shows.
func (b *Breaker) State() BreakerState {
	state := b.cb.State()
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BreakerState{State: state.String(), Since: b.since, Opened: b.opened, LastError: b.lastErr}
	if state == gobreaker.StateOpen || b.holdTill.After(b.now()) {
		// gobreaker turns half-open after the first pause; a longer one is still open here.
		t := b.holdTill
		s.State, s.RetryAt = gobreaker.StateOpen.String(), &t
	}
	if state == gobreaker.StateClosed && b.opened == 0 {
		s.LastError = ""
	}
	return s
}
