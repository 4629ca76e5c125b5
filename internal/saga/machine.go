package saga

import (
	"errors"
	"fmt"
	"time"

	"github.com/walletsaga/walletsaga/internal/backoff"
)

// The phases of a saga and the statuses of a step record, as stored.
const (
	phaseForward    = "forward"
	phaseCompensate = "compensate"

	statusPending = "pending"
	statusDone    = "done"
	statusFailed  = "failed"
	statusSkipped = "skipped"
)

// CodeAttemptsExhausted is the error code of a step whose retry window ran out without
// giving a code of its own.
const CodeAttemptsExhausted = "attempts_exhausted"

// CodeCompensationFailed is the error code of a saga in NeedsAttention because a
// compensation failed for good or exhausted its retry window.
const CodeCompensationFailed = "compensation_failed"

// position is where a saga stands: its state, current step and phase, and the attempts
// already counted for that step (the one in progress included).
type position struct {
	State    State
	Step     int
	Phase    string
	Attempts int
}

// stepWrite is one step-history row to insert or update.
type stepWrite struct {
	Step     int
	Name     string
	Phase    string
	Status   string
	Attempts int
	Err      *ErrorInfo
}

// transition is what follows one attempt: the saga's new position, how long until it is
// due again, the history to write, and the saga's new error (nil: keep it).
type transition struct {
	To      position
	Delay   time.Duration
	Records []stepWrite
	Err     *ErrorInfo
}

// continues reports whether the runner should go on with the saga right away.
func (t transition) continues() bool { return !t.To.State.Terminal() && t.Delay == 0 }

// decide is the saga state machine: the attempt numbered at.Attempts (1-based, already
// counted) of the step at position at came to o, elapsed after the step's first attempt
// began; cur is the saga's current error. It is pure; jitter(n) returns a random number in
// [0, n).
func decide(d *Definition, at position, o Outcome, elapsed time.Duration, cur *ErrorInfo, jitter func(int64) int64) transition {
	attempt := max(at.Attempts, 1)
	if at.Step < 0 || at.Step >= len(d.Steps) {
		return transition{
			To:  position{State: NeedsAttention, Step: max(at.Step, 0), Phase: at.Phase, Attempts: attempt},
			Err: &ErrorInfo{Code: "unknown_step", Message: fmt.Sprintf("step %d is not in the definition of %q (%d steps)", at.Step, d.Kind, len(d.Steps))},
		}
	}
	st := d.Steps[at.Step]
	if at.Phase == phaseCompensate && st.Compensate.zero() {
		return compensateFrom(d, transition{}, at.Step) // the definition changed since the saga started
	}
	// A remote action that exhausted its window may have taken effect (a lost response, a
	// timeout): unlike one that failed for good, it is compensated itself.
	uncertain := false
	if o.Kind == OutcomeRetry && elapsed >= d.Window {
		code := o.Code
		if code == "" {
			code = CodeAttemptsExhausted
		}
		o = Fail(code, fmt.Errorf("gave up after %d attempts over %s: %s", attempt, elapsed.Round(time.Millisecond), errText(o.Err)))
		uncertain = at.Phase == phaseForward && st.Do.Remote != nil
	}
	rec := stepWrite{Step: at.Step, Name: st.Name, Phase: at.Phase, Attempts: attempt}

	switch o.Kind {
	case OutcomeDone:
		rec.Status = statusDone
		t := transition{Records: []stepWrite{rec}}
		if at.Phase == phaseCompensate {
			return compensateFrom(d, t, at.Step-1)
		}
		if at.Step+1 == len(d.Steps) {
			t.To = position{State: Completed, Step: at.Step, Phase: phaseForward, Attempts: attempt}
			return t
		}
		t.To = position{State: Running, Step: at.Step + 1, Phase: phaseForward}
		return t

	case OutcomeRetry:
		rec.Status = statusPending
		rec.Err = &ErrorInfo{Code: o.Code, Message: errText(o.Err)}
		next := at
		next.Attempts = attempt
		delay := backoff.Policy{Base: d.BackoffBase, Max: d.BackoffMax}.Delay(attempt, jitter)
		return transition{To: next, Delay: max(o.Delay, delay), Records: []stepWrite{rec}}
	}

	// OutcomeFail, or an outcome of unknown kind (a bug in the step), which is no success.
	e := &ErrorInfo{Code: o.Code, Message: errText(o.Err)}
	if o.Kind != OutcomeFail {
		e = &ErrorInfo{Code: "invalid_outcome", Message: fmt.Sprintf("step returned outcome kind %d", o.Kind)}
	}
	if e.Code == "" {
		e.Code = "failed"
	}
	rec.Status, rec.Err = statusFailed, e
	t := transition{Records: []stepWrite{rec}}
	if at.Phase == phaseCompensate {
		orig := "unknown"
		if cur != nil {
			orig = cur.Code + ": " + cur.Message
		}
		t.To = position{State: NeedsAttention, Step: at.Step, Phase: phaseCompensate, Attempts: attempt}
		t.Err = &ErrorInfo{
			Code:    CodeCompensationFailed,
			Message: fmt.Sprintf("compensation of step %q failed (%s: %s) while undoing a saga that failed with %s", st.Name, e.Code, e.Message, orig),
		}
		return t
	}
	t.Err = e
	if uncertain && !st.Compensate.zero() {
		return compensateFrom(d, t, at.Step)
	}
	if at.Step == 0 {
		t.To = position{State: Failed, Step: 0, Phase: phaseForward, Attempts: attempt}
		return t
	}
	return compensateFrom(d, t, at.Step-1)
}

// compensateFrom moves t to the compensation of step i, skipping (and recording) steps
// that have nothing to undo; with nothing left, the saga is compensated.
func compensateFrom(d *Definition, t transition, i int) transition {
	for ; i >= 0 && d.Steps[i].Compensate.zero(); i-- {
		t.Records = append(t.Records, stepWrite{Step: i, Name: d.Steps[i].Name, Phase: phaseCompensate, Status: statusSkipped})
	}
	if i < 0 {
		t.To = position{State: Compensated, Step: 0, Phase: phaseCompensate}
		return t
	}
	t.To = position{State: Compensating, Step: i, Phase: phaseCompensate}
	return t
}

// action is the action due at position p (zero when there is none).
func (d *Definition) action(p position) Action {
	if p.Step < 0 || p.Step >= len(d.Steps) {
		return Action{}
	}
	if p.Phase == phaseCompensate {
		return d.Steps[p.Step].Compensate
	}
	return d.Steps[p.Step].Do
}

// folded is one commit's worth of the state machine: the transition from where the runner
// stands through every local action that follows (taken as done unless known otherwise), up
// to the next remote action (its first attempt counted), a backoff, or the end.
type folded struct {
	transition
	// Locals are the positions of the local actions the commit runs, in order; their
	// statements go into the commit.
	Locals []position
	// NewPosition is whether the saga ends at another position than it started from (the
	// step's retry window starts again).
	NewPosition bool
}

// fold plans one commit. The saga stands at `at`; first is the outcome of its current
// action's attempt, or nil when that action is local (and runs in this commit). known holds
// the outcomes of local actions learnt from earlier tries of the same commit (a statement
// that failed): for those, the outcome is known instead of assumed. elapsed is the time spent
// on the current step so far.
func fold(d *Definition, at position, first *Outcome, known map[position]Outcome, elapsed time.Duration, cur *ErrorInfo, jitter func(int64) int64) folded {
	var f folded
	if first == nil && d.action(at).Remote != nil {
		// A saga that starts with a remote step: the commit only counts its first attempt.
		f.To = at
		f.To.Attempts = max(at.Attempts, 1)
		f.Records = []stepWrite{{Step: at.Step, Name: d.Steps[at.Step].Name, Phase: at.Phase, Status: statusPending, Attempts: f.To.Attempts}}
		return f
	}
	p, o := at, Outcome{}
	if first != nil {
		o = *first
	}
	local := first == nil
	for {
		if local {
			switch k, ok := known[p]; {
			case ok:
				o = k
			case d.action(p).Local != nil:
				o = Done()
				f.Locals = append(f.Locals, p)
			default:
				o = Done() // nothing to run: decide skips or flags it
			}
		}
		if p != at {
			elapsed = 0
		}
		t := decide(d, p, o, elapsed, cur, jitter)
		f.Records = append(f.Records, t.Records...)
		if t.Err != nil {
			f.Err, cur = t.Err, t.Err
		}
		f.To, f.Delay = t.To, t.Delay
		if !t.continues() {
			break
		}
		next := t.To
		act := d.action(next)
		if act.Local == nil {
			if act.Remote != nil {
				// Count the first attempt of the remote action this commit leads to, so that
				// a crash during the call still counts.
				f.To.Attempts = 1
				f.Records = append(f.Records, stepWrite{Step: next.Step, Name: d.Steps[next.Step].Name, Phase: next.Phase,
					Status: statusPending, Attempts: 1})
			}
			break
		}
		next.Attempts = 1
		p, local = next, true
	}
	f.NewPosition = f.To.Step != at.Step || f.To.Phase != at.Phase
	return f
}

func (a Action) zero() bool { return a.Local == nil && a.Remote == nil }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// validate checks d and fills in its defaults.
func validate(d *Definition) error {
	if d.Kind == "" {
		return errors.New("empty kind")
	}
	if len(d.Steps) == 0 {
		return errors.New("no steps")
	}
	if d.Window < 0 || d.AttemptTimeout < 0 || d.BackoffBase < 0 || d.BackoffMax < 0 {
		return errors.New("negative Window, AttemptTimeout or backoff")
	}
	seen := make(map[string]bool, len(d.Steps))
	for i, s := range d.Steps {
		switch {
		case s.Name == "":
			return fmt.Errorf("step %d has no name", i)
		case seen[s.Name]:
			return fmt.Errorf("duplicate step name %q", s.Name)
		case (s.Do.Local == nil) == (s.Do.Remote == nil):
			return fmt.Errorf("step %q: Do needs exactly one of Local and Remote", s.Name)
		case s.Compensate.Local != nil && s.Compensate.Remote != nil:
			return fmt.Errorf("step %q: Compensate has both Local and Remote", s.Name)
		}
		seen[s.Name] = true
	}
	d.Steps = append([]Step(nil), d.Steps...)
	if d.Window == 0 {
		d.Window = 10 * time.Minute
	}
	if d.AttemptTimeout == 0 {
		d.AttemptTimeout = 5 * time.Second
	}
	if d.BackoffBase == 0 {
		d.BackoffBase = 100 * time.Millisecond
	}
	if d.BackoffMax == 0 {
		d.BackoffMax = 30 * time.Second
	}
	d.BackoffMax = max(d.BackoffMax, d.BackoffBase)
	return nil
}
