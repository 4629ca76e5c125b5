package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// errMoved means the saga is no longer this runner's: a recovery runner took it over after
// its lease expired. The runner lets go.
var errMoved = errors.New("saga: another runner holds the saga")

// recordTimeout bounds writing an outcome after the runner was asked to stop.
const recordTimeout = 5 * time.Second

// maxTransientTries bounds how often one commit is sent again after a deadlock or a
// serialization failure.
const maxTransientTries = 3

// runner holds one saga's lease and drives it: one remote attempt, then one commit, and so on.
type runner struct {
	e      *Engine
	d      *Definition
	id     int64
	kind   string
	input  json.RawMessage
	data   json.RawMessage
	fence  int64
	inline bool // started here: the row is written by the first commit, and the history is all known
	// nonce is the saga's (sagas.key_nonce; not Valid for a saga created before it existed);
	// keyPrefix, made of the id and the nonce, starts the saga's idempotency keys (StepKey).
	nonce     pgtype.UUID
	keyPrefix string

	at        position // where the saga stands, as committed (for Start: where it starts)
	stepSince time.Time
	err       *ErrorInfo
	inserted  bool
	delay     time.Duration // of the latest commit: the saga waits in a backoff
	w         written
	steps     []StepRecord // the saga's history, as committed: read at the claim, or all written here

	// traceparent is the span that started the saga, as stored with it ("" untraced); span
	// is that span, known to the runner that started the saga: its run is its child.
	traceparent string
	span        trace.SpanContext
}

// drive runs the saga until it ends, waits in a backoff, or ctx is done.
func (r *runner) drive(ctx context.Context) error {
	if r.d == nil {
		return fmt.Errorf("saga %d: kind %q is not registered here", r.id, r.kind)
	}
	ctx, span := r.startRun(ctx)
	defer span.End()
	for !r.at.State.Terminal() && r.delay == 0 {
		act := r.d.action(r.at)
		if act.Local != nil || act.zero() {
			// Only a recovered saga stands at a local action: one that was left in backoff.
			if err := r.commit(ctx, nil, nil); err != nil {
				return err
			}
			continue
		}
		o, ok := r.call(ctx, act.Remote)
		if !ok {
			return ctx.Err() // abandoned: re-run later with the same key
		}
		if ctx.Err() != nil {
			// Keep an outcome even though we are stopping; the fence makes this safe.
			var stop context.CancelFunc
			ctx, stop = context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
			defer stop()
		}
		if err := r.commit(ctx, &o, nil); err != nil {
			return err
		}
	}
	return nil
}

// call makes one attempt of the remote action at r.at. ok is false when ctx ended before a
// definite answer.
func (r *runner) call(ctx context.Context, f RemoteFunc) (o Outcome, ok bool) {
	name := r.d.Steps[r.at.Step].Name
	key := StepKey(r.keyPrefix, name)
	if r.at.Phase == phaseCompensate {
		key += CompensateSuffix
	}
	inst := &Instance{ID: r.id, Kind: r.kind, KeyPrefix: r.keyPrefix, Input: r.input, Data: r.data}
	actx, cancel := context.WithTimeout(ctx, r.d.AttemptTimeout)
	actx, span := tracer.Start(actx, "saga.call", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(r.attrs(attribute.String("saga.step", name), attribute.String("saga.phase", r.at.Phase),
			attribute.String("saga.idempotency_key", key))...)
	}
	start := time.Now()
	o = protect(func() Outcome { return f(actx, key, inst) })
	took := time.Since(start)
	endWithOutcome(span, o)
	cancel()
	if ctx.Err() != nil && o.Kind != OutcomeDone {
		return o, false
	}
	r.observe(r.at, o, took)
	r.data = inst.Data
	return o, true
}

// commit plans and sends one commit: the outcome first of the action at r.at (nil: that
// action is local and runs in this commit), every local action after it, up to the next
// remote one or a backoff or the end. A local action whose statement fails is classified and
// the commit planned again with that outcome known. queue adds the caller's statements to a
// saga's first commit.
func (r *runner) commit(ctx context.Context, first *Outcome, queue Queue) (err error) {
	ctx, span := tracer.Start(ctx, "saga.commit")
	defer func() { endWithError(span, err) }()
	traceparent := telemetry.Traceparent(ctx)
	known := map[position]Outcome{}
	transient := 0
	for {
		elapsed := time.Duration(0)
		if !r.stepSince.IsZero() {
			elapsed = time.Since(r.stepSince)
		}
		f := fold(r.d, r.at, first, known, elapsed, r.err, rand.Int64N)
		inst := &Instance{ID: r.id, Kind: r.kind, KeyPrefix: r.keyPrefix, Input: r.input, Data: r.data, Traceparent: traceparent}
		// The local actions' statements, queued first so that they may set the data the
		// saga's own update writes.
		locals := make([]*pgx.Batch, len(f.Locals))
		replan := false
		for i, p := range f.Locals {
			locals[i] = &pgx.Batch{}
			if o := protect(func() Outcome { return r.d.action(p).Local(inst, locals[i]) }); o.Kind != OutcomeDone {
				r.observe(p, o, 0)
				known[p], replan = o, true
				break
			}
		}
		if replan {
			continue
		}
		keep := f.continues()
		w := sagaWrite{ID: r.id, Kind: r.kind, Input: r.input, Data: inst.Data, To: f.To, Err: f.Err,
			NewPosition: f.NewPosition, Keep: keep, Owner: r.e.opts.Owner, Fence: r.fence}
		switch {
		case keep:
			w.Due = r.e.opts.Lease
		case !f.To.State.Terminal():
			w.Due = f.Delay
		}
		b := &pgx.Batch{}
		var out written
		history := withRecords(r.steps, f.Records)
		if r.inserted || !r.inline {
			queueUpdate(b, w, history, &out)
		} else {
			queueInsert(b, w, history, r.traceparent, r.nonce, &out)
		}
		own := len(b.QueuedQueries)
		if queue != nil && !r.inserted {
			queue(r.id, b)
		}
		callers := len(b.QueuedQueries)
		bounds := make([]int, len(locals)) // end of each local action's statements
		for i, lb := range locals {
			b.QueuedQueries = append(b.QueuedQueries, lb.QueuedQueries...)
			bounds[i] = len(b.QueuedQueries)
		}
		done := countResults(b)
		start := time.Now()
		err := r.e.commits.send(ctx, b)
		took := time.Since(start)
		if err == nil {
			for _, p := range f.Locals {
				r.observe(p, Done(), took)
			}
			if span.IsRecording() {
				span.SetAttributes(r.attrs(attribute.String("saga.state", string(f.To.State)), attribute.Int("saga.local_steps", len(f.Locals)))...)
			}
			r.committed(f, inst.Data, history, out)
			for _, fn := range inst.afterCommit {
				fn()
			}
			return nil
		}
		failed := *done
		switch {
		case failed < own && isFenceLost(err):
			return errMoved
		case isTransient(err) && transient < maxTransientTries:
			transient++
			continue
		case failed < own:
			return fmt.Errorf("saga %d: commit: %w", r.id, err)
		case failed < callers:
			return err
		case failed >= len(b.QueuedQueries):
			// Every statement ran; the commit itself failed.
			return fmt.Errorf("saga %d: commit: %w", r.id, err)
		}
		i := 0
		for bounds[i] <= failed {
			i++
		}
		o := r.classify(err)
		r.observe(f.Locals[i], o, took)
		known[f.Locals[i]] = o
	}
}

// committed moves the runner to where commit f left the saga, with history.
func (r *runner) committed(f folded, data json.RawMessage, history []StepRecord, out written) {
	r.inserted = true
	r.data, r.steps = data, history
	r.at, r.delay, r.w = f.To, f.Delay, out
	r.stepSince = out.StepSince
	if f.Err != nil {
		r.err = f.Err
	}
	switch {
	case f.To.State.Terminal():
		r.e.waiters.wake(r.id)
	case f.Delay > 0:
		r.e.noteDue(time.Now().Add(f.Delay))
	}
}

// withRecords returns the history steps followed by a commit's records, leaving steps as it
// is: a record of a step and phase whose open (pending) record is in the history closes or
// updates that one (a failure keeps the error it had unless it brings its own; done clears
// it), and any other record is appended.
func withRecords(steps []StepRecord, recs []stepWrite) []StepRecord {
	out := slices.Clone(steps)
	for _, w := range recs {
		rec := StepRecord{Step: w.Step, Name: w.Name, Phase: w.Phase, Status: w.Status, Attempts: w.Attempts, Error: w.Err}
		open := -1
		for i := len(out) - 1; i >= 0; i-- {
			if s := out[i]; s.Step == w.Step && s.Phase == w.Phase && s.Status == statusPending {
				open = i
				break
			}
		}
		if open < 0 {
			out = append(out, rec)
			continue
		}
		if w.Status == statusDone {
			rec.Error = nil
		} else if rec.Error == nil {
			rec.Error = out[open].Error
		}
		out[open] = rec
	}
	return out
}

func (r *runner) snapshot() Snapshot {
	return Snapshot{
		ID: r.id, Kind: r.kind, KeyPrefix: r.keyPrefix, State: r.at.State, Input: r.input, Data: r.data, Error: r.err,
		Steps: append([]StepRecord(nil), r.steps...), CreatedAt: r.w.CreatedAt, UpdatedAt: r.w.UpdatedAt,
	}
}

// classify says what the failure of a local action's statement means.
func (r *runner) classify(err error) Outcome {
	if r.d.Classify != nil {
		if o, ok := r.d.Classify(err); ok {
			return o
		}
	}
	return Retry(err)
}

// observe tells the observer, if any, about an attempt of the action at p.
func (r *runner) observe(p position, o Outcome, took time.Duration) {
	if r.e.opts.Observer == nil || p.Step >= len(r.d.Steps) {
		return
	}
	r.e.opts.Observer.ObserveStep(r.kind, r.d.Steps[p.Step].Name, p.Phase, o.Kind, took)
}

// countResults wraps the result handlers of b's statements so that the returned counter
// says how many succeeded: after a failed send, the index of the statement that failed.
func countResults(b *pgx.Batch) *int {
	n := new(int)
	for _, qq := range b.QueuedQueries {
		fn := qq.Fn
		qq.Fn = func(br pgx.BatchResults) error {
			var err error
			if fn == nil {
				_, err = br.Exec()
			} else {
				err = fn(br)
			}
			if err == nil {
				*n++
			}
			return err
		}
	}
	return n
}

// protect runs a step, turning a panic into a retryable outcome.
func protect(f func() Outcome) (o Outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = Retry(fmt.Errorf("step panicked: %v", p))
		}
	}()
	return f()
}

// tracer starts the engine's spans: a saga's start, each run (inline, background or
// recovery), each remote call and each commit.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/saga")

// startRun starts the span of one run of the saga. The runner that started the saga runs it
// as a child of its start span; a recovery run, which takes over what an earlier process
// left, starts a trace of its own, linked to the span that started the saga.
func (r *runner) startRun(ctx context.Context) (context.Context, trace.Span) {
	if r.span.IsValid() {
		ctx, span := tracer.Start(trace.ContextWithSpanContext(ctx, r.span), "saga.run")
		if span.IsRecording() {
			span.SetAttributes(r.attrs()...)
		}
		return ctx, span
	}
	ctx, span := tracer.Start(ctx, "saga.recover", trace.WithNewRoot(), telemetry.Link(r.traceparent))
	if span.IsRecording() {
		span.SetAttributes(r.attrs(attribute.Int("saga.attempts", r.at.Attempts))...)
	}
	return ctx, span
}

// attrs are the saga's span attributes, and more.
func (r *runner) attrs(more ...attribute.KeyValue) []attribute.KeyValue {
	return append([]attribute.KeyValue{attribute.Int64("saga.id", r.id), attribute.String("saga.kind", r.kind)}, more...)
}

// endWithOutcome ends the span of a remote attempt, an error unless it was done.
func endWithOutcome(span trace.Span, o Outcome) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("saga.outcome", o.Kind.String()))
		if o.Kind != OutcomeDone && o.Err != nil {
			span.SetStatus(codes.Error, o.Err.Error())
		}
	}
	span.End()
}

// endWithError ends a span, an error when err is not nil.
func endWithError(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
