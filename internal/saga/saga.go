// Package saga is a generic, durable, orchestrated saga engine on PostgreSQL. It knows
// nothing of wallets: a saga is an ordered list of steps, each with an action and an optional
// compensation.
//
// A saga runs inline: Start commits it (in one round trip, together with the caller's own
// statements and every local step up to the first remote one) holding a lease, and the
// caller's goroutine then drives it (Drive, or Go in the background) to its end or to its first
// backoff. Each remote call is followed by exactly one commit, which records the outcome and
// runs every local step that follows it, forward or compensating, up to the next remote call
// (whose attempt it counts) or the end. Every commit is a single pgx.Batch, so a single round
// trip and one implicit transaction; its first statement is the engine's update of the saga,
// fenced: it fails unless the runner still holds the saga's fence, so a runner whose lease
// was taken over changes nothing. The engine's Recovery only picks up the rest: it claims, in
// batches with FOR UPDATE SKIP LOCKED, the sagas whose lease expired (a runner died) or whose
// backoff is due.
//
// Local steps queue their statements in the commit that records them; a statement that fails
// (a CHECK constraint, say) rolls the whole commit back, the Definition's Classify says what
// the error means, and the commit is planned and sent again with that outcome. So a local
// step is applied exactly once whatever crashes, with its saga state change in the same
// transaction. Remote steps get an idempotency key (StepKey: the saga's KeyPrefix, its own
// across databases and restores, + the step) and are retried forward
// with capped exponential backoff and jitter for the Definition's Window, each attempt bounded
// by a timeout; compensations run in reverse order and are retried likewise; a compensation
// that fails for good or exhausts its window puts the saga in NeedsAttention.
//
// Which steps are compensated when a forward step fails:
//
//   - A step that returned Fail had a definite outcome: it did not take effect. Only the
//     steps before it are compensated, latest first; with none, the saga is Failed.
//   - A remote step that exhausted its window (every attempt gave Retry, timed out, or was
//     lost in a crash) has no definite outcome: a call whose response was lost may have
//     taken effect. Its own compensation runs first (with the key "<prefix>:<step>:compensate"),
//     then those of the steps before it, latest first. A remote step without a compensation
//     is taken to need no undoing.
//   - A local step that exhausted its window never committed, so it is not compensated.
//
// A compensation may therefore run for a step that never took effect: each must be
// idempotent and must succeed when there is nothing to undo.
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

// The states. Completed, Compensated, Failed, NeedsAttention and Resolved are terminal.
const (
	Running        State = "running"
	Compensating   State = "compensating"
	Completed      State = "completed"
	Compensated    State = "compensated"
	Failed         State = "failed"
	NeedsAttention State = "needs_attention"
	// Resolved is a saga an operator settled by hand after it needed attention (see
	// Engine.ResolveTx); the engine never touches it again.
	Resolved State = "resolved"
)

// Terminal reports whether no runner will touch a saga in state s again by itself.
func (s State) Terminal() bool {
	return s == Completed || s == Compensated || s == Failed || s == NeedsAttention || s == Resolved
}

// States lists every state, in lifecycle order.
var States = []State{Running, Compensating, Completed, Compensated, Failed, NeedsAttention, Resolved}

// OutcomeKind says what a step's attempt came to.
type OutcomeKind int

// The outcome kinds.
const (
	OutcomeDone  OutcomeKind = iota + 1 // the step is done; move on
	OutcomeRetry                        // try again later, within the step's window
	OutcomeFail                         // permanent failure: compensate what was done
)

// Outcome is what a step returns.
type Outcome struct {
	Kind  OutcomeKind
	Delay time.Duration // for OutcomeRetry: at least this long before the next attempt (0 = engine backoff)
	Code  string        // for OutcomeFail: a machine-readable reason, e.g. "insufficient_funds"
	Err   error         // the reason, human-readable (recorded in step history and saga error)
}

// String names the outcome kind as metrics and logs show it: done, retry or fail.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeFail:
		return "fail"
	}
	return "unknown"
}

// StepObserver is told about each attempt of a step or compensation once it has an outcome:
// the saga kind, the step name, the phase ("forward" or "compensate"), the outcome and how
// long the attempt's work took. It must be quick and safe for concurrent use (metrics).
type StepObserver interface {
	ObserveStep(kind, step, phase string, outcome OutcomeKind, took time.Duration)
}

// KindStateCount is how many sagas of a kind are in a state.
type KindStateCount struct {
	Kind  string
	State State
	Count int64
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
	ID   int64
	Kind string
	// KeyPrefix starts the idempotency keys of the saga's remote steps (StepKey).
	KeyPrefix string
	Input     json.RawMessage // as given to Start; never changes
	// Data is state shared between steps (e.g. a charge id). A step may replace it with
	// SetData; the engine persists it with the step's outcome (for local steps, in the same
	// transaction).
	Data json.RawMessage
	// Traceparent is the W3C traceparent of the commit running a local step, "" when tracing
	// is off: a step whose row another process picks up (an outbox row) stores it there, so
	// that the trace goes on from this commit.
	Traceparent string

	afterCommit []func()
}

// AfterCommit asks that fn run once the transaction carrying the step's statements has
// committed (a local step: e.g. to hand the rows it wrote to whoever publishes them, with
// what the statements returned). fn does not run when that transaction fails; it must be
// quick and must not block.
func (i *Instance) AfterCommit(fn func()) { i.afterCommit = append(i.afterCommit, fn) }

// SetData replaces the instance's data with v encoded as JSON.
func (i *Instance) SetData(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	i.Data = b
	return nil
}

// LocalFunc is a local step: it queues its statements on b, which the engine sends in the
// transaction that records the step, after its own fenced update of the saga and before the
// commit. It must change the database only through those statements, and a statement must
// fail (a constraint, an overflow) when the step cannot take effect: the engine then rolls
// the transaction back and asks the Definition's Classify what the error means. It may read
// s and call s.SetData; it must not block. It returns Done once it has queued its
// statements, or, queueing nothing, another outcome it can tell without the database (an
// input that does not decode).
type LocalFunc func(s *Instance, b *pgx.Batch) Outcome

// RemoteFunc is a remote step: it calls another party with idempotencyKey, which is stable
// across retries and crashes (StepKey for an action, StepKey + CompensateSuffix for a
// compensation). ctx carries the per-attempt timeout. It returns Fail only when it knows the
// call did not and will not take effect (e.g. a declined card); when in doubt (a timeout, a
// lost response) it returns Retry: the engine asks again with the same key, which for a
// remote party that honours keys is the status query, and once the window is exhausted it
// compensates the step itself too.
type RemoteFunc func(ctx context.Context, idempotencyKey string, s *Instance) Outcome

// CompensateSuffix ends the idempotency key of a compensation: StepKey(prefix, step) +
// CompensateSuffix.
const CompensateSuffix = ":compensate"

// StepKey is the idempotency key the engine gives the remote action of step in the saga
// whose KeyPrefix (Instance.KeyPrefix, Snapshot.KeyPrefix) is prefix: "<prefix>:<step name>".
// A compensation can use it to find what the action did at the remote party (e.g. refund the
// charge made with that key).
//
// A saga's KeyPrefix is "<saga id>-<nonce>", the nonce 128 random bits (32 hex digits) that
// Start mints and writes with the saga in the commit that creates it, and that never
// changes: so the keys stay the same across retries, compensations and restarts, and are
// the saga's own among every saga of every database that calls the same remote party. Saga
// ids alone repeat: in another deployment, and in this one restored from a backup (which
// restores everything stored with the saga, so no stored deployment id would tell "saga 101
// before the restore" from "saga 101 after it"; a nonce minted after the backup does). A saga
// created before the nonce existed has the prefix "<saga id>", the keys it sent then.
func StepKey(prefix, step string) string {
	return prefix + ":" + step
}

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
	Name string
	Do   Action
	// Compensate undoes Do; the zero value means there is nothing to undo. It runs after a
	// later step failed, and also after Do itself, if remote, ran out of attempts without a
	// definite outcome (see the package doc): it may then find that Do never took effect.
	// It must be idempotent and must tolerate nothing-to-undo, succeeding in that case; if
	// it can, it should also make sure a late-arriving Do cannot take effect afterwards
	// (e.g. by voiding Do's idempotency key at the remote party).
	Compensate Action
}

// Definition describes a kind of saga.
type Definition struct {
	Kind  string
	Steps []Step
	// Window is how long the attempts of one step or compensation may go on (retrying with
	// backoff) before it counts as exhausted (default 10 minutes).
	Window time.Duration
	// AttemptTimeout bounds one attempt of a remote step (default 5s).
	AttemptTimeout time.Duration
	// BackoffBase and BackoffMax shape the exponential backoff with jitter between attempts
	// (defaults 100ms and 30s).
	BackoffBase, BackoffMax time.Duration
	// Classify says what the failure of a local step's statement means: Fail with a code for
	// a definite refusal (a CHECK constraint), Done for a step that had already taken effect,
	// Retry for anything transient. Nil, or an error it does not recognise (ok=false),
	// means Retry.
	Classify func(err error) (o Outcome, ok bool)
}

// ErrorInfo is why a saga or step failed.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StepRecord is one step's history, in order of execution.
type StepRecord struct {
	Step     int        `json:"step"` // the step's index in its definition
	Name     string     `json:"name"`
	Phase    string     `json:"phase"`  // "forward" or "compensate"
	Status   string     `json:"status"` // "pending", "done", "failed", "skipped"
	Attempts int        `json:"attempts"`
	Error    *ErrorInfo `json:"error,omitempty"`
}

// Snapshot is a saga as stored.
type Snapshot struct {
	ID   int64
	Kind string
	// KeyPrefix starts the idempotency keys of the saga's remote steps (StepKey): what to ask
	// a remote party about.
	KeyPrefix string
	State     State
	Input     json.RawMessage
	Data      json.RawMessage
	Error     *ErrorInfo
	Steps     []StepRecord
	CreatedAt time.Time
	UpdatedAt time.Time
}
