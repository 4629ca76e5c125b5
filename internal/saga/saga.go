// Package saga is a generic, durable, orchestrated saga engine on PostgreSQL. It knows
// nothing of wallets: a saga is an ordered list of steps, each with an action and an optional
// compensation, run by runners that claim due sagas with FOR UPDATE SKIP LOCKED and a lease.
//
// Local steps run inside a pgx transaction in which the engine also records the step and
// advances the saga, so a local step is applied exactly once whatever crashes. Remote steps
// get an idempotency key (saga id + step) and are retried with exponential backoff and
// jitter up to a limit, each attempt bounded by a timeout. Compensations run in reverse order
// and are retried too; when they are exhausted the saga enters NeedsAttention.
//
// This file is the contract other packages build against; engine.go implements it.
package saga

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// State is a saga's state.
type State string

// The states. Completed, Compensated, Failed and NeedsAttention are terminal.
const (
	Running        State = "running"
	Compensating   State = "compensating"
	Completed      State = "completed"
	Compensated    State = "compensated"
	Failed         State = "failed"
	NeedsAttention State = "needs_attention"
)

// Terminal reports whether no runner will touch a saga in state s again by itself.
func (s State) Terminal() bool {
	return s == Completed || s == Compensated || s == Failed || s == NeedsAttention
}

// OutcomeKind says what a step's attempt came to.
type OutcomeKind int

// The outcome kinds.
const (
	OutcomeDone  OutcomeKind = iota + 1 // the step is done; move on
	OutcomeRetry                        // try again later (counts against the attempt limit)
	OutcomeFail                         // permanent failure: compensate what was done
)

// Outcome is what a step returns.
type Outcome struct {
	Kind  OutcomeKind
	Delay time.Duration // for OutcomeRetry: at least this long before the next attempt (0 = engine backoff)
	Code  string        // for OutcomeFail: a machine-readable reason, e.g. "insufficient_funds"
	Err   error         // the reason, human-readable (recorded in step history and saga error)
}

// Done means the step succeeded.
func Done() Outcome { return Outcome{Kind: OutcomeDone} }

// Retry means the attempt failed but may succeed later, after the engine's backoff.
func Retry(err error) Outcome { return Outcome{Kind: OutcomeRetry, Err: err} }

// RetryAfter is Retry with a minimum delay.
func RetryAfter(err error, d time.Duration) Outcome {
	return Outcome{Kind: OutcomeRetry, Err: err, Delay: d}
}

// Fail means the step failed for good; code is machine-readable ("declined", "rejected").
func Fail(code string, err error) Outcome { return Outcome{Kind: OutcomeFail, Code: code, Err: err} }

// Instance is what a step sees of its saga.
type Instance struct {
	ID    int64
	Kind  string
	Input json.RawMessage // as given to Start; never changes
	// Data is state shared between steps (e.g. a charge id). A step may replace it with
	// SetData; the engine persists it with the step's outcome (for local steps, in the same
	// transaction).
	Data json.RawMessage
}

// SetData replaces the instance's data with v encoded as JSON.
func (i *Instance) SetData(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	i.Data = b
	return nil
}

// LocalFunc is a local step: it does its work in tx, which the engine commits together with
// the step record and the saga's advance. Returning anything but Done rolls tx back.
type LocalFunc func(ctx context.Context, tx pgx.Tx, s *Instance) Outcome

// RemoteFunc is a remote step: it calls another party with idempotencyKey, which is stable
// across retries and crashes ("<saga id>:<step name>" or "<saga id>:<step name>:compensate").
// ctx carries the per-attempt timeout.
type RemoteFunc func(ctx context.Context, idempotencyKey string, s *Instance) Outcome

// Action is a step's action or compensation: exactly one of Local and Remote is set.
type Action struct {
	Local  LocalFunc
	Remote RemoteFunc
}

// Local wraps a LocalFunc as an Action.
func Local(f LocalFunc) Action { return Action{Local: f} }

// Remote wraps a RemoteFunc as an Action.
func Remote(f RemoteFunc) Action { return Action{Remote: f} }

// Step is one step of a saga definition.
type Step struct {
	Name       string
	Do         Action
	Compensate Action // zero value: nothing to undo
}

// Definition describes a kind of saga.
type Definition struct {
	Kind  string
	Steps []Step
	// MaxAttempts bounds the attempts of each step and each compensation (default 5).
	MaxAttempts int
	// AttemptTimeout bounds one attempt of a remote step (default 5s).
	AttemptTimeout time.Duration
	// BackoffBase and BackoffMax shape the exponential backoff with jitter between attempts
	// (defaults 100ms and 5s).
	BackoffBase, BackoffMax time.Duration
}

// ErrorInfo is why a saga or step failed.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StepRecord is one step's history, in order of execution.
type StepRecord struct {
	Name     string     `json:"name"`
	Phase    string     `json:"phase"`  // "forward" or "compensate"
	Status   string     `json:"status"` // "pending", "done", "failed", "skipped"
	Attempts int        `json:"attempts"`
	Error    *ErrorInfo `json:"error,omitempty"`
}

// Snapshot is a saga as stored.
type Snapshot struct {
	ID        int64
	Kind      string
	State     State
	Input     json.RawMessage
	Data      json.RawMessage
	Error     *ErrorInfo
	Steps     []StepRecord
	CreatedAt time.Time
	UpdatedAt time.Time
}
