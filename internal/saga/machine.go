package saga

import (
	"errors"
	"fmt"
	"time"
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

// CodeAttemptsExhausted is the error code of a step that ran out of attempts without
// giving a code of its own.
const CodeAttemptsExhausted = "attempts_exhausted"

// CodeCompensationFailed is the error code of a saga in NeedsAttention because a
// compensation failed for good or ran out of attempts.
const CodeCompensationFailed = "compensation_failed"

// position is where a saga stands: its state, current step and phase, and the attempts
// already counted for that step.
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

// decide is the saga state machine: the attempt numbered attempt (1-based, already
// counted) of the step at position at came to o; cur is the saga's current error. It is
// pure; jitter(n) returns a random number in [0, n).
func decide(d *Definition, at position, attempt int, o Outcome, cur *ErrorInfo, jitter func(int64) int64) transition {
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
	// A remote action that ran out of attempts may have taken effect (a lost response, a
	// timeout): unlike one that failed for good, it is compensated itself.
	uncertain := false
	if o.Kind == OutcomeRetry && attempt >= d.MaxAttempts {
		code := o.Code
		if code == "" {
			code = CodeAttemptsExhausted
		}
		o = Fail(code, fmt.Errorf("gave up after %d attempts: %s", attempt, errText(o.Err)))
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
		return transition{To: next, Delay: max(o.Delay, backoff(d, attempt, jitter)), Records: []stepWrite{rec}}
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

// backoff is the delay before attempt+1: exponential from BackoffBase, capped at
// BackoffMax, with equal jitter (half fixed, half random), never below BackoffBase.
func backoff(d *Definition, attempt int, jitter func(int64) int64) time.Duration {
	exp := d.BackoffBase
	for i := 1; i < attempt; i++ {
		if exp > d.BackoffMax/2 {
			exp = d.BackoffMax
			break
		}
		exp *= 2
	}
	exp = min(exp, d.BackoffMax)
	half := exp / 2
	return min(max(half+time.Duration(jitter(int64(exp-half)+1)), d.BackoffBase), d.BackoffMax)
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
	if d.MaxAttempts < 0 || d.AttemptTimeout < 0 || d.BackoffBase < 0 || d.BackoffMax < 0 {
		return errors.New("negative MaxAttempts, AttemptTimeout or backoff")
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
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 5
	}
	if d.AttemptTimeout == 0 {
		d.AttemptTimeout = 5 * time.Second
	}
	if d.BackoffBase == 0 {
		d.BackoffBase = 100 * time.Millisecond
	}
	if d.BackoffMax == 0 {
		d.BackoffMax = 5 * time.Second
	}
	d.BackoffMax = max(d.BackoffMax, d.BackoffBase)
	return nil
}
