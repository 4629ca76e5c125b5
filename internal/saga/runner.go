package saga

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// errMoved means the saga is no longer where this runner left it, or no longer leased to
// it: another runner took over (or the step already committed). The runner lets go.
var errMoved = errors.New("saga: moved on or lease lost")

// errNotDone rolls back a local step's transaction when the step did not succeed.
var errNotDone = errors.New("saga: local step not done")

// recordTimeout bounds writing an outcome after the engine was asked to stop.
const recordTimeout = 5 * time.Second

// work runs the saga id, which this engine has just claimed, for as long as it is due:
// step after step, until it waits in backoff, ends, or ctx is done. A heartbeat extends
// the lease meanwhile; the lease is released on the way out.
func (e *Engine) work(ctx context.Context, id int64) {
	wctx, cancel := context.WithCancelCause(ctx)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		e.heartbeat(wctx, cancel, id)
	}()
	defer func() {
		cancel(nil)
		<-beat
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer done()
		if err := releaseLease(rctx, e.pool, id, e.opts.Owner); err != nil {
			e.log.Warn("saga: release lease", "saga", id, "err", err)
		}
	}()
	for wctx.Err() == nil {
		more, err := e.attempt(wctx, id)
		if err != nil {
			if wctx.Err() == nil && !errors.Is(err, errMoved) {
				e.log.Warn("saga: attempt not recorded; will retry", "saga", id, "err", err)
			}
			return
		}
		if !more {
			return
		}
	}
}

// heartbeat extends the lease on id every third of its length, and cancels the work with
// errMoved if another runner holds it now.
func (e *Engine) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, id int64) {
	t := time.NewTicker(max(e.opts.Lease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := extendLease(ctx, e.pool, id, e.opts.Owner, e.opts.Lease)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("saga: extend lease", "saga", id, "err", err)
		case err == nil && !ok:
			cancel(errMoved)
			return
		}
	}
}

// attempt runs one attempt of the saga's current step and records its outcome. It
// reports whether the saga is due again right away (and still leased to this runner).
func (e *Engine) attempt(ctx context.Context, id int64) (bool, error) {
	r, err := loadSaga(ctx, e.pool, id, false)
	if err != nil {
		return false, err
	}
	if r.LeaseOwner == nil || *r.LeaseOwner != e.opts.Owner {
		return false, errMoved
	}
	d := e.definition(r.Kind)
	if d == nil || r.State.Terminal() || !r.Due {
		return false, nil
	}
	var act Action
	if r.Step < len(d.Steps) {
		act = d.Steps[r.Step].Do
		if r.Phase == phaseCompensate {
			act = d.Steps[r.Step].Compensate
		}
	}
	switch {
	case act.zero(): // an unknown step or nothing to undo: the definition changed since the saga started
		return e.record(ctx, d, r, r.Attempts, Done(), r.Data)
	case r.Attempts >= d.MaxAttempts: // the attempts ran out in crashes or abandoned calls
		return e.record(ctx, d, r, r.Attempts, Retry(errors.New("no outcome recorded for the last attempt")), r.Data)
	case act.Local != nil:
		return e.runLocal(ctx, d, r, act.Local)
	default:
		return e.runRemote(ctx, d, r, act.Remote)
	}
}

// runLocal calls f in the transaction that records its success, so that a local step
// takes effect exactly once. Any other outcome is recorded in a transaction of its own.
func (e *Engine) runLocal(ctx context.Context, d *Definition, r sagaRow, f LocalFunc) (bool, error) {
	var o Outcome
	var t transition
	var took time.Duration
	err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
		cur, err := e.lock(ctx, tx, r)
		if err != nil {
			return err
		}
		inst := cur.instance()
		start := time.Now()
		o = call(func() Outcome { return f(ctx, tx, inst) })
		took = time.Since(start)
		if o.Kind != OutcomeDone {
			return errNotDone
		}
		t = decide(d, cur.position, cur.Attempts+1, o, cur.Err, rand.Int64N)
		return applyTransition(ctx, tx, r.ID, t, inst.Data, t.continues(), e.opts.Lease)
	})
	switch {
	case err == nil:
		e.observe(r, d, o, took)
		return e.left(t), nil
	case errors.Is(err, errMoved) || ctx.Err() != nil:
		return false, err
	case !errors.Is(err, errNotDone):
		// The step said Done but its transaction did not commit: nothing took effect.
		o = Retry(err)
	}
	e.observe(r, d, o, took)
	return e.record(ctx, d, r, r.Attempts+1, o, r.Data)
}

// runRemote counts the attempt (committed before the call, so crashes count too), calls f
// with the step's idempotency key and the attempt timeout, and records the outcome.
func (e *Engine) runRemote(ctx context.Context, d *Definition, r sagaRow, f RemoteFunc) (bool, error) {
	n := r.Attempts + 1
	name := d.Steps[r.Step].Name
	err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := e.lock(ctx, tx, r); err != nil {
			return err
		}
		return countAttempt(ctx, tx, &r, name, n)
	})
	if err != nil {
		return false, err
	}
	r.Attempts = n
	key := StepKey(r.ID, name)
	if r.Phase == phaseCompensate {
		key += CompensateSuffix
	}
	inst := r.instance()
	actx, cancel := context.WithTimeout(ctx, d.AttemptTimeout)
	start := time.Now()
	o := call(func() Outcome { return f(actx, key, inst) })
	took := time.Since(start)
	cancel()
	if ctx.Err() == nil || o.Kind == OutcomeDone {
		e.observe(r, d, o, took)
	}
	if ctx.Err() != nil {
		if o.Kind != OutcomeDone {
			return false, ctx.Err() // abandoned: re-run later with the same key
		}
		// Keep a success even though we are stopping; the lock and lease checks in record
		// make this safe.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer stop()
	}
	return e.record(ctx, d, r, n, o, inst.Data)
}

// record writes the transition that outcome o of attempt n leads to, if the saga is still
// where r says and leased to this runner.
func (e *Engine) record(ctx context.Context, d *Definition, r sagaRow, n int, o Outcome, data []byte) (bool, error) {
	var t transition
	err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
		cur, err := e.lock(ctx, tx, r)
		if err != nil {
			return err
		}
		t = decide(d, cur.position, n, o, cur.Err, rand.Int64N)
		return applyTransition(ctx, tx, r.ID, t, data, t.continues(), e.opts.Lease)
	})
	if err != nil {
		return false, err
	}
	return e.left(t), nil
}

// lock locks the saga row in tx and checks that it is still leased to this engine and at
// the step, phase and attempt count of r.
func (e *Engine) lock(ctx context.Context, tx pgx.Tx, r sagaRow) (sagaRow, error) {
	cur, err := loadSaga(ctx, tx, r.ID, true)
	if err != nil {
		return cur, err
	}
	if cur.LeaseOwner == nil || *cur.LeaseOwner != e.opts.Owner || cur.position != r.position {
		return cur, errMoved
	}
	return cur, nil
}

// left reports whether to go on with the saga after transition t; a saga left in backoff
// is remembered so that the dispatcher wakes when it is due.
func (e *Engine) left(t transition) bool {
	switch {
	case t.continues():
		return true
	case !t.To.State.Terminal():
		e.noteDue(time.Now().Add(t.Delay))
	}
	return false
}

// observe tells the observer, if any, about an attempt of r's current step.
func (e *Engine) observe(r sagaRow, d *Definition, o Outcome, took time.Duration) {
	if e.opts.Observer == nil || r.Step >= len(d.Steps) {
		return
	}
	e.opts.Observer.ObserveStep(r.Kind, d.Steps[r.Step].Name, r.Phase, o.Kind, took)
}

// call runs a step, turning a panic into a retryable outcome.
func call(f func() Outcome) (o Outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = Retry(fmt.Errorf("step panicked: %v", p))
		}
	}()
	return f()
}
