// Package providersim is a payment gateway and merchant that speak walletsaga's provider
// contract (internal/provider, openapi.yaml) over HTTP, for development, tests, the demo,
// make chaos and make bench. It approves every payment source except DeclinedSource, so it
// must never run where real money moves: cmd/providersim refuses to start outside dev.
//
// Deterministic hooks: the source DeclinedSource is declined; a merchant reference starting
// with RejectPrefix is rejected, one starting with FlakyPrefix answers 503 to its first
// FlakyFailures calls per key and is then placed; a payout's destination likewise (refused
// for good, or failing FlakyFailures times and then paid). A call under an Idempotency-Key
// another call to the same operation is still processing is answered 409 in_progress, the one
// meaning of 409 in the contract; a finished call's key gets its result again. Options add
// latency and random failures (half before doing anything, half after, the response then
// lost: the connection is closed unanswered). An outage switch (SetOutage, or POST /sim/outages) makes every call
// of the gateway or the merchant fail at once (503) or hang until the caller gives up.
// What it holds lives in a Store: MemoryStore, or PostgresStore in a schema of its own.
package providersim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"
)

// The deterministic hooks.
const (
	// DeclinedSource is the payment source the gateway always declines.
	DeclinedSource = "card_declined"
	// RejectPrefix: a merchant reference or a payout destination starting with it is
	// rejected for good.
	RejectPrefix = "reject-"
	// FlakyPrefix: a merchant reference or a payout destination starting with it fails
	// FlakyFailures times per idempotency key (retryably), then is placed or paid.
	FlakyPrefix = "flaky-"
	// FlakyFailures is how many calls per key a flaky- order or payout fails.
	FlakyFailures = 2
)

// The targets of an outage.
const (
	TargetGateway  = "gateway"
	TargetMerchant = "merchant"
)

// The modes of an outage.
const (
	// OutageFail: every call is answered 503 at once, having done nothing.
	OutageFail = "fail"
	// OutageTimeout: every call hangs, unanswered, until its caller gives up (or the
	// outage ends: then it is answered 503, having done nothing).
	OutageTimeout = "timeout"
)

// DevToken is the bearer token the simulator accepts unless told another: documented,
// because the simulator only ever runs in dev.
const DevToken = "walletsaga-dev-provider-token" //nolint:gosec // G101: the documented dev token of a dev-only simulator, not a secret

// Options shape the simulator.
type Options struct {
	// Token is the bearer token every call must carry (default DevToken).
	Token string
	// Latency is added to every call of the contract.
	Latency time.Duration
	// FailureRate (0–1) is the share of calls that fail retryably: half before doing
	// anything (503), half after doing it (the connection is closed unanswered, a lost
	// response), so that retries exercise the key's idempotency.
	FailureRate float64
	// Logger receives store failures (default: discard).
	Logger *slog.Logger
}

// Simulator is the gateway and the merchant, on one store.
type Simulator struct {
	store Store
	opts  Options

	mu      sync.Mutex
	outages map[string]outage
	// inflight holds the calls being processed, by path and Idempotency-Key.
	inflight map[[2]string]bool

	closed    chan struct{}
	closeOnce sync.Once
}

type outage struct {
	mode  string
	until time.Time
}

// New returns a simulator on store.
func New(store Store, o Options) (*Simulator, error) {
	if store == nil {
		return nil, errors.New("providersim: nil store")
	}
	if o.FailureRate < 0 || o.FailureRate > 1 {
		return nil, fmt.Errorf("providersim: failure rate %v is not within 0–1", o.FailureRate)
	}
	if o.Latency < 0 {
		return nil, fmt.Errorf("providersim: negative latency %s", o.Latency)
	}
	if o.Token == "" {
		o.Token = DevToken
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Simulator{store: store, opts: o, outages: map[string]outage{}, inflight: map[[2]string]bool{}, closed: make(chan struct{})}, nil
}

// Store returns the simulator's store (for tests and audits that count charges and orders).
func (s *Simulator) Store() Store { return s.store }

// Close releases every call that hangs in a latency or a timing-out outage (they are
// answered 503), so that a server shutting down does not wait for them. Idempotent.
func (s *Simulator) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// SetOutage switches an outage of target (TargetGateway or TargetMerchant) on for d: every
// call fails at once (OutageFail) or hangs until its caller gives up (OutageTimeout),
// having done nothing. d = 0 ends the target's outage now.
func (s *Simulator) SetOutage(target, mode string, d time.Duration) error {
	if err := checkOutage(target, mode, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d == 0 {
		delete(s.outages, target)
		return nil
	}
	s.outages[target] = outage{mode: mode, until: time.Now().Add(d)}
	return nil
}

func checkOutage(target, mode string, d time.Duration) error {
	var problems []string
	if target != TargetGateway && target != TargetMerchant {
		problems = append(problems, fmt.Sprintf("target must be %q or %q, got %q", TargetGateway, TargetMerchant, target))
	}
	if mode != OutageFail && mode != OutageTimeout {
		problems = append(problems, fmt.Sprintf("mode must be %q or %q, got %q", OutageFail, OutageTimeout, mode))
	}
	if d < 0 {
		problems = append(problems, fmt.Sprintf("duration must not be negative, got %s", d))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// outageOf returns target's outage now (mode "" when there is none).
func (s *Simulator) outageOf(target string) outage {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.outages[target]
	if !ok {
		return outage{}
	}
	if time.Now().After(o.until) {
		delete(s.outages, target)
		return outage{}
	}
	return o
}

// hold marks the call to path under key as being processed until release; held is false
// when another call under them is (the caller answers 409 in_progress). It is this process's
// view: the store, not hold, keeps one operation per key.
func (s *Simulator) hold(path, key string) (release func(), held bool) {
	k := [2]string{path, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[k] {
		return nil, false
	}
	s.inflight[k] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.inflight, k)
	}, true
}

// injected is what a call draws: a failure before it does anything, after (a lost
// response), or none.
type injected int

const (
	injectNone injected = iota
	injectBefore
	injectAfter
)

// wait holds the call for the configured latency; false if the caller gave up or the
// simulator closed first.
func (s *Simulator) wait(ctx context.Context) bool {
	if s.opts.Latency <= 0 {
		return true
	}
	t := time.NewTimer(s.opts.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closed:
	}
	return false
}

// draw draws the call's injected failure.
func (s *Simulator) draw() injected {
	if s.opts.FailureRate <= 0 || mrand.Float64() >= s.opts.FailureRate {
		return injectNone
	}
	if mrand.IntN(2) == 0 {
		return injectBefore
	}
	return injectAfter
}

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
