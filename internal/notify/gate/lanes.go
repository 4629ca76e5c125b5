// The lanes: the dispatcher claims due users, each worker sends a user's SMS in order.

package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// LaneConfig configures the delivery lanes.
type LaneConfig struct {
	// Workers is how many users are delivered to at once (SMS_WORKERS; DefaultWorkers). Each
	// worker holds one user and sends that user's SMS one after the other, in seq order.
	Workers int
	// Owner names this process in the leases it takes; unique among live processes. A
	// process restarted under the same owner takes its predecessor's leases back at start.
	Owner string
	// Lease is how long a worker holds a user without recording anything (default 30s): a
	// process that dies leaves its users to the others after that. It must be more than
	// twice SendTimeout.
	Lease time.Duration
	// SendTimeout bounds one call to the provider (SMS_TIMEOUT; DefaultWebhookTimeout when
	// zero). A worker starts a send only while its lease has at least twice this left: the
	// call's own time, and as much again to record the outcome before another lane may
	// claim the user. With less left (it stalled, or a record took long) it gives the user
	// back, due at once, to be claimed again under a new fence and a whole lease.
	SendTimeout time.Duration
	// RecordTimeout bounds one attempt of a record statement (default 5s, well below
	// smslog.FeedLag, so that the change feed never skips a record that committed late), and
	// RecordAttempts is how many attempts one user's outcomes get (default 3) before the
	// worker gives the user back, to be claimed again under a new fence (whose lane sends
	// the SMS again under the same provider key).
	RecordTimeout  time.Duration
	RecordAttempts int
	// Poll is how soon the dispatcher looks for due users when nothing woke it (default
	// 500ms): for SMS another replica's consumer received, and retries another replica
	// gave back. Each look that finds nothing doubles the wait, up to IdlePoll (default ten
	// times Poll); a look that finds work, or news, starts again from Poll. While work flows
	// the dispatcher is woken in-process instead: by the inbox's writes, by freed workers,
	// by this process's retries and postponed sends as they come due, and by users given
	// back due at once.
	Poll     time.Duration
	IdlePoll time.Duration
	// RunMax is how many SMS a worker sends to one user before it lets other users have a
	// turn (default 100).
	RunMax int
	Policy RetryPolicy
	// Breaker holds sends back while the provider as a whole fails; nil: a default one.
	Breaker *senders.Breaker
	Sender  notify.Sender
	// ObserveSent, when set, is told, for each SMS recorded as sent, how long after its
	// event's commit (OccurredAt) the record came: the commit→SMS latency (metrics).
	ObserveSent func(sinceCommit time.Duration)
	// DeadLettered is called after dead letters were recorded (to wake the DLQ publisher).
	DeadLettered func()
	Logger       *slog.Logger
}

// DefaultWorkers is the default size of the worker pool. A user waits for a free worker,
// and each worker's turn with a user costs a claim and a record, so with more active users
// than workers an SMS waits about users ÷ workers turns: on a CPU-starved machine, where a
// turn took 0.5–1 s, 1,000 active users and 64 workers put the log sender's commit→SMS p99
// at 2–27 s, and 256 workers at 0.7–2.5 s. It is also how many requests a webhook provider
// sees at once from one replica at most; lower SMS_WORKERS if the provider caps that.
const DefaultWorkers = 256

// LaneStats counts what the lanes did since start.
type LaneStats struct {
	Sent         int64 `json:"sent"`
	Retried      int64 `json:"retried"`
	DeadLettered int64 `json:"dead_lettered"`
	Postponed    int64 `json:"postponed"` // held back by the breaker, no attempt spent
	Fenced       int64 `json:"fenced"`    // outcomes not recorded: the user was claimed again under a new fence
	Claims       int64 `json:"claims"`    // users taken
	// RecordFailures counts record attempts that failed (the database away, a timeout, a
	// conflict).
	RecordFailures int64 `json:"record_failures"`
	// RecordsGivenUp counts users given back because their outcomes could not be recorded
	// within RecordAttempts attempts.
	RecordsGivenUp int64 `json:"records_given_up"`
	// RecordsRefused counts outcomes the database refused for their data, isolated by
	// splitting their record batch and recorded instead as a failed attempt whose reason
	// is the refusal.
	RecordsRefused int64 `json:"records_refused"`
	// LeaseShort counts users given back unsent because their lease had less than twice
	// the send timeout left.
	LeaseShort int64 `json:"lease_short"`
	// Records counts record statements: fewer than the outcomes recorded when the workers'
	// outcomes share statements.
	Records int64 `json:"records"`
}

// Lanes delivers the inbox: a dispatcher claims users whose next SMS is due (FOR UPDATE
// SKIP LOCKED, so replicas share them; each claim takes a new fence) and hands each to a
// worker, which sends that user's SMS in seq order — each only once the gate admits it
// (Admit: its predecessor is recorded sent, dead-lettered or skipped) — and records each
// outcome, under its claim's fence, through one recorder that groups the outcomes of all
// workers into few transactions.
// Different users proceed in parallel; a failing or slow user holds only its own worker.
//
// Start begins delivering. It first reads the deployment id (retrying while the database is
// away) and gives back the leases its owner name still holds from a previous run; a
// predecessor that still runs can then record nothing more. Stop stops claiming users, lets
// each worker finish the SMS in hand, record it and give its user back, and returns once
// they have.
type Lanes struct {
	// Runner delivers in the background between Start and Stop.
	*lifecycle.Runner
	store    *Store
	cfg      LaneConfig
	log      *slog.Logger
	journal  bool
	wake     chan struct{}
	freed    chan struct{}
	recorder *groupcommit.Committer[commitReq]
	// busy counts the workers running and those reserved for a claim (the dispatcher's, or
	// an inbox write's ticket): never more than Workers.
	busy atomic.Int64
	// workers are the running workers; tickets the reservations not yet taken. mu guards
	// open (tickets are handed out) and the contexts the workers run on (see run).
	workers, tickets sync.WaitGroup
	mu               sync.Mutex
	open             bool
	stopCtx, workCtx context.Context
	// deployment is the notifier tables' deployment id, read once at start: part of every
	// provider key.
	deployment string

	sent, retried, dead, postponed, fenced, claims, recordFailures atomic.Int64
	recordsGivenUp, recordsRefused, leaseShort, records            atomic.Int64
	// claimStatements counts claim statements (the tests' measure of how many users each
	// takes).
	claimStatements atomic.Int64
}

// NewLanes returns the lanes over store; Start delivers.
func NewLanes(store *Store, cfg LaneConfig) (*Lanes, error) {
	if cfg.Sender == nil {
		return nil, errors.New("gate: lanes need a sender")
	}
	if cfg.Owner == "" {
		return nil, errors.New("gate: lanes need an owner name")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = senders.DefaultWebhookTimeout
	}
	if cfg.Lease <= 2*cfg.SendTimeout {
		return nil, fmt.Errorf("gate: a lane lease of %s leaves no time to send: it must be more than twice the send timeout (%s)", cfg.Lease, cfg.SendTimeout)
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = 5 * time.Second
	}
	if cfg.RecordAttempts <= 0 {
		cfg.RecordAttempts = 3
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.IdlePoll < cfg.Poll {
		cfg.IdlePoll = 10 * cfg.Poll
	}
	if cfg.RunMax <= 0 {
		cfg.RunMax = 100
	}
	if cfg.Breaker == nil {
		cfg.Breaker = senders.NewBreaker(senders.BreakerConfig{})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Lanes{
		store: store, cfg: cfg, log: cfg.Logger.With("component", "lanes"), journal: notify.IsJournaled(cfg.Sender),
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1),
	}
	l.recorder = l.newRecorder()
	l.Runner = lifecycle.NewRunner(l.run)
	return l, nil
}

// Wake tells the dispatcher that the inbox has news (it does not block).
func (l *Lanes) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Busy returns how many users are being delivered to now.
func (l *Lanes) Busy() int64 { return l.busy.Load() }

// Workers returns the size of the worker pool.
func (l *Lanes) Workers() int { return l.cfg.Workers }

// Policy returns the retry policy in force.
func (l *Lanes) Policy() RetryPolicy { return l.cfg.Policy }

// Breaker returns the provider breaker.
func (l *Lanes) Breaker() *senders.Breaker { return l.cfg.Breaker }

// Stats returns the counters.
func (l *Lanes) Stats() LaneStats {
	return LaneStats{Sent: l.sent.Load(), Retried: l.retried.Load(), DeadLettered: l.dead.Load(),
		Postponed: l.postponed.Load(), Fenced: l.fenced.Load(), Claims: l.claims.Load(), RecordFailures: l.recordFailures.Load(),
		RecordsGivenUp: l.recordsGivenUp.Load(), RecordsRefused: l.recordsRefused.Load(), LeaseShort: l.leaseShort.Load(),
		Records: l.records.Load()}
}

// RecorderStats returns what the recorder wrote: groups of the workers' outcomes (a request
// per user's run), each recorded in one statement unless the database refused one of them.
func (l *Lanes) RecorderStats() groupcommit.Stats { return l.recorder.Stats() }

// run delivers until ctx is cancelled, then lets each worker finish the SMS in hand,
// record it and give its user back, and returns (see Lanes).
func (l *Lanes) run(ctx context.Context) error {
	for {
		d, err := l.store.DeploymentID(ctx)
		if err == nil {
			l.deployment = d
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		l.log.Warn("reading the deployment id failed; retrying", "err", err)
		l.sleep(ctx, l.cfg.Poll, nil)
	}
	if n, err := l.store.releaseAll(ctx, l.cfg.Owner); err != nil {
		l.log.Warn("could not give back the leases of a previous run; they expire on their own", "err", err)
	} else if n > 0 {
		l.log.Info("took back the leases of a previous run", "users", n, "owner", l.cfg.Owner)
	}
	// Workers finish the SMS in hand after ctx ends, so their sends and records must not
	// die with it.
	work := context.WithoutCancel(ctx)
	if err := l.recorder.Start(work); err != nil {
		return err
	}

	l.mu.Lock()
	l.open, l.stopCtx, l.workCtx = true, ctx, work
	l.mu.Unlock()
	l.dispatch(ctx)
	// No more tickets; the workers of those handed out start before they are taken.
	l.mu.Lock()
	l.open = false
	l.mu.Unlock()
	l.tickets.Wait()
	l.workers.Wait()
	// Every worker has handed its outcomes over: the recorder records what is left.
	return l.recorder.Stop(work)
}

// dispatch claims due users and starts a worker for each, until ctx is cancelled.
func (l *Lanes) dispatch(ctx context.Context) {
	br := l.cfg.Breaker
	poll := time.NewTimer(0)
	defer poll.Stop()
	idle := l.cfg.Poll
	for ctx.Err() == nil {
		if wait := br.Wait(); wait > 0 {
			l.sleep(ctx, wait, br.Changed())
			continue
		}
		probe := br.HalfOpen()
		want := l.cfg.Workers
		if probe {
			want = 1 // one SMS tells whether the provider is back
		}
		free := l.reserve(want)
		if free <= 0 {
			select {
			case <-ctx.Done():
			case <-l.freed:
			}
			continue
		}
		// The lease ends no sooner than this process's clock says: the database's now(),
		// from which it counts, is read after the statement leaves.
		leaseEnd := time.Now().Add(l.cfg.Lease)
		claims, err := l.store.claimUsers(ctx, l.cfg.Owner, free, l.cfg.Lease, l.runLen())
		if err != nil {
			l.unreserve(free)
			if ctx.Err() == nil {
				l.log.Warn("claiming users failed; retrying", "err", err)
				l.sleep(ctx, l.cfg.Poll, nil)
			}
			continue
		}
		l.claimStatements.Add(1)
		if len(claims) > 0 {
			idle = l.cfg.Poll
		}
		l.startWorkers(claims, leaseEnd)
		l.unreserve(free - len(claims))
		switch {
		case probe:
			l.sleep(ctx, l.cfg.Poll, br.Changed())
		case len(claims) < free:
			// Nothing more is due: wait for news (an inbox write, a retry of this process
			// coming due, a user given back due at once), or the poll, which stretches
			// while it finds nothing.
			poll.Reset(idle)
			select {
			case <-ctx.Done():
			case <-l.wake:
				idle = l.cfg.Poll
			case <-poll.C:
				idle = min(2*idle, l.cfg.IdlePoll)
			case <-br.Changed():
			}
		}
	}
}

func (l *Lanes) sleep(ctx context.Context, d time.Duration, or <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-or:
	}
}

// reserve takes up to n free workers (fewer when fewer are free) and returns how many.
func (l *Lanes) reserve(n int) int {
	for {
		b := l.busy.Load()
		k := min(int64(n), int64(l.cfg.Workers)-b)
		if k <= 0 {
			return 0
		}
		if l.busy.CompareAndSwap(b, b+k) {
			return int(k)
		}
	}
}

// unreserve gives back n reserved workers that got no user.
func (l *Lanes) unreserve(n int) {
	if n <= 0 {
		return
	}
	l.busy.Add(-int64(n))
	l.signalFreed()
}

func (l *Lanes) signalFreed() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// startWorkers starts a worker, on a reserved slot, for each claim.
func (l *Lanes) startWorkers(claims []claim, leaseEnd time.Time) {
	l.claims.Add(int64(len(claims)))
	for _, c := range claims {
		l.workers.Add(1)
		go func() {
			defer func() {
				l.busy.Add(-1)
				l.workers.Done()
				l.signalFreed()
			}()
			l.work(l.stopCtx, l.workCtx, c, leaseEnd)
		}()
	}
}

// Ticket reserves free workers for the users an inbox write may claim itself (Store.Arrive):
// an idle user whose next SMS the write brings then costs no wake row and no claim
// statement. Take must be called once per ticket, after the write committed or failed.
type Ticket struct {
	l        *Lanes
	n        int
	owner    string
	lease    time.Duration
	run      int
	leaseEnd time.Time
}

// Reserve returns a ticket for up to n users, or nil (claim none) when no worker is free,
// the breaker holds sends back or lets a probe through (the dispatcher probes), or the
// lanes are not running. A nil *Lanes reserves nothing.
func (l *Lanes) Reserve(n int) *Ticket {
	if l == nil || n <= 0 {
		return nil
	}
	if br := l.cfg.Breaker; br.Wait() > 0 || br.HalfOpen() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open || l.stopCtx.Err() != nil {
		return nil
	}
	k := l.reserve(n)
	if k == 0 {
		return nil
	}
	l.tickets.Add(1)
	// The lease ends no sooner than this: the write's statement starts after it.
	return &Ticket{l: l, n: k, owner: l.cfg.Owner, lease: l.cfg.Lease, run: l.runLen(), leaseEnd: time.Now().Add(l.cfg.Lease)}
}

// Take starts a worker for each user the write claimed (a committed write's answer; pass
// Arrived{} for a write that failed) and frees the other reserved workers. A nil ticket
// takes nothing.
func (t *Ticket) Take(a Arrived) {
	if t == nil {
		return
	}
	l := t.l
	claims := a.claims
	if len(claims) > t.n {
		// The statement claims at most the slots it was given: this is a bug, and the extra
		// users come back when their lease ends.
		l.log.Error("an inbox write claimed more users than it reserved workers for", "claimed", len(claims), "reserved", t.n)
		claims = claims[:t.n]
	}
	l.startWorkers(claims, t.leaseEnd)
	l.unreserve(t.n - len(claims))
	l.tickets.Done()
}

// step is what a lane does with a user's head.
type step int

const (
	stepRelease    step = iota // no head in the inbox: give the user back
	stepAdvance                // the head is finished already: move past it
	stepDeadLetter             // the head's stored event or text is unusable: dead-letter it at once
	stepSend                   // send it
)

// plan decides what to do with a head. It is pure. The SMS it sends has the text the inbox
// rendered on arrival (head.Text), never one rendered again here: what the inbox and the SMS
// log show of a pending SMS is what goes out, whatever the templates became since. The
// stored event gives the rest (phone, locale, amount, when it occurred).
func plan(h head) (step, notify.SMS, string) {
	switch h.Status {
	case "":
		return stepRelease, notify.SMS{}, ""
	case StatusSent, StatusDeadLettered, StatusSkipped:
		return stepAdvance, notify.SMS{}, ""
	}
	ev, err := walletevent.Decode(h.Event)
	if err != nil {
		return stepDeadLetter, notify.SMS{}, "the stored event no longer decodes: " + err.Error()
	}
	if ev.UserID != h.UserID || ev.Seq != h.Seq {
		return stepDeadLetter, notify.SMS{}, fmt.Sprintf("the stored event is for %s, not %d:%d", ev.SeqKey(), h.UserID, h.Seq)
	}
	if h.Text == "" {
		// A row stored without its text (by a notifier from before the inbox rendered on
		// arrival): rendered here, once, rather than lost. A message is never dead-lettered
		// for what this process can still do.
		sms, err := notify.Render(ev)
		if err != nil {
			return stepDeadLetter, notify.SMS{}, "the stored event does not render: " + err.Error()
		}
		return stepSend, sms, ""
	}
	return stepSend, notify.Compose(ev, h.Text), ""
}

// runLen is how many of a user's waiting SMS a worker takes at once: with a journaled sender
// (whose delivery is the row the record writes) its whole turn (RunMax) goes into one record,
// so a user's turn costs one claim and one record however many SMS it had waiting; any other
// sender's SMS are sent and recorded one at a time.
func (l *Lanes) runLen() int {
	if l.journal {
		return l.cfg.RunMax
	}
	return 1
}

// sendable reports whether a lease with left to run may start a send that may take up to
// timeout: only with twice timeout left, the send's own time and as much again to record
// its outcome before the lease ends and another lane may claim the user. It is pure.
func sendable(left, timeout time.Duration) bool {
	return left >= 2*timeout
}

// work delivers one claimed user's SMS in order until its inbox run ends, a failure makes it
// wait, RunMax is reached, too little of the lease (which ends at leaseEnd, on this
// process's clock) is left to send, or the process stops. It sends only what the gate
// admits as the user's next seq under the claim's fence (Admit), and moves along a run as
// the gate does (Advance).
func (l *Lanes) work(stop, ctx context.Context, c claim, leaseEnd time.Time) {
	heads := c.Heads
	for done := 0; ; {
		if stop.Err() != nil || done >= l.cfg.RunMax {
			l.giveBack(ctx, c, true)
			return
		}
		h := heads[0]
		s, sms, reason := plan(h)
		var outs []outcome
		switch s {
		case stepRelease:
			// News that landed since the claim read the inbox keeps its wake row: the next
			// claim takes the user again.
			l.giveBack(ctx, c, false)
			return
		case stepAdvance:
			outs = []outcome{{UserID: h.UserID, Seq: h.Seq, Verdict: verdictAdvance}}
		case stepDeadLetter:
			outs = []outcome{{UserID: h.UserID, Seq: h.Seq, Verdict: DeadLettered, Attempts: h.Attempts, Reason: reason,
				Age: h.Age + time.Since(h.ReadAt)}}
			l.log.Error("dead-lettering an SMS whose stored event is unusable", "user_id", h.UserID, "seq", h.Seq, "reason", reason)
		case stepSend:
			if a := Admit(c.At, h.Seq, c.At.Fence); a != Next {
				// The claim read the user's heads from its next seq on: this is a bug.
				l.log.Error("the gate refused a lane's send; giving the user back", "user_id", h.UserID, "seq", h.Seq, "admission", a)
				l.giveBack(ctx, c, true)
				return
			}
			if left := time.Until(leaseEnd); !sendable(left, l.cfg.SendTimeout) {
				l.leaseShort.Add(1)
				l.log.Warn("giving a user back unsent: too little of its lease is left to send and record",
					"user_id", h.UserID, "seq", h.Seq, "lease_left", left.Round(time.Millisecond), "send_timeout", l.cfg.SendTimeout)
				l.giveBack(ctx, c, true)
				return
			}
			outs = []outcome{l.deliver(ctx, h, sms)}
			// A journaled sender's further waiting SMS join the run (its delivery is the
			// record, which writes the run in seq order) for as long as the gate admits
			// each once its predecessor is recorded as the run's outcome says.
			at := Advance(c.At, h.Seq, outs[0].Verdict)
			for _, next := range heads[1:] {
				if Admit(at, next.Seq, c.At.Fence) != Next || !sendable(time.Until(leaseEnd), l.cfg.SendTimeout) {
					break
				}
				ns, nsms, _ := plan(next)
				if ns != stepSend {
					break
				}
				o := l.deliver(ctx, next, nsms)
				outs = append(outs, o)
				at = Advance(at, next.Seq, o.Verdict)
			}
		}
		began := time.Now()
		res, ok := l.commit(stop, ctx, c, outs)
		if !ok {
			return
		}
		// The record renewed the lease from its statement's start, which was after began.
		leaseEnd = began.Add(l.cfg.Lease)
		outs = res.outs
		for _, o := range outs {
			switch o.Verdict {
			case Sent:
				l.sent.Add(1)
				if l.cfg.ObserveSent != nil && !o.OccurredAt.IsZero() {
					l.cfg.ObserveSent(time.Since(o.OccurredAt))
				}
			case DeadLettered:
				l.dead.Add(1)
				if l.cfg.DeadLettered != nil {
					l.cfg.DeadLettered()
				}
			case Retry:
				l.retried.Add(1)
			case Postponed:
				l.postponed.Add(1)
			}
		}
		if v := outs[len(outs)-1].Verdict; v == Retry || v == Postponed || res.r.Released {
			if v == Retry || v == Postponed {
				// Due again after its delay: the dispatcher is woken then, whatever its poll.
				time.AfterFunc(outs[len(outs)-1].Delay, l.Wake)
			}
			return
		}
		done += len(outs)
		c.At, heads = res.r.At, res.r.Heads
	}
}

// giveBack releases the user under the claim's fence: due at once with requeue, else idle.
// It is bounded like a record attempt; if it fails, the lease runs out on its own.
func (l *Lanes) giveBack(ctx context.Context, c claim, requeue bool) {
	// A record attempt that timed out may still hold the user's progress row for a moment
	// (the server ends it within the attempt's bound, see Store.record): try again, spaced
	// as records are, before leaving the user to its lease.
	var err error
	for attempt := 1; attempt <= l.cfg.RecordAttempts; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.RecordTimeout)
		err = l.store.release(rctx, c.UserID, c.At.Fence, requeue)
		cancel()
		if err == nil || ctx.Err() != nil || attempt == l.cfg.RecordAttempts {
			break
		}
		t := time.NewTimer(recordBackoff.Delay(attempt, rand.Int64N))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err != nil {
		l.log.Warn("giving a user back failed; its lease will expire", "user_id", c.UserID, "err", err)
		return
	}
	if requeue {
		l.Wake() // due at once
	}
}

// deliver sends one SMS through the breaker, under its provider key and within the send
// timeout, and decides, with the retry policy, what becomes of it.
func (l *Lanes) deliver(ctx context.Context, h head, m notify.SMS) outcome {
	m.IdempotencyKey = notify.ProviderKey(l.deployment, h.UserID, h.Seq, m.Epoch)
	o := outcome{UserID: h.UserID, Seq: h.Seq, Text: m.Text, Phone: m.Phone, Journal: l.journal}
	o.OccurredAt = m.OccurredAt
	done, counted, hold, err := l.cfg.Breaker.Allow(h.UserID)
	if err != nil {
		o.Verdict, o.Attempts, o.Delay, o.Reason = Postponed, h.Attempts, hold, "held back: the SMS provider breaker is open"
		o.Age = h.Age + time.Since(h.ReadAt)
		return o
	}
	sctx, cancel := context.WithTimeout(telemetry.WithParent(ctx, h.Traceparent), l.cfg.SendTimeout)
	sctx, span := tracer.Start(sctx, "sms.send", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("sms.user_id", h.UserID), attribute.Int64("sms.seq", h.Seq),
			attribute.Int("sms.prior_attempts", h.Attempts), attribute.String("sms.idempotency_key", m.IdempotencyKey))
	}
	sendErr := l.cfg.Sender.Send(sctx, m)
	if sendErr != nil {
		span.SetStatus(codes.Error, sendErr.Error())
	}
	span.End()
	cancel()
	done(sendErr)
	a := Attempt{Prior: h.Attempts, Age: h.Age + time.Since(h.ReadAt), Err: sendErr}
	if sendErr != nil && !counted && errors.Is(sendErr, notify.ErrProviderUnavailable) {
		a.Held = l.cfg.Breaker.Hold()
	}
	d := l.cfg.Policy.Decide(a, rand.Int64N)
	o.Verdict, o.Attempts, o.Delay, o.Reason, o.Age = d.Verdict, d.Attempts, d.Delay, d.Reason, a.Age
	switch d.Verdict {
	case Retry:
		l.log.InfoContext(sctx, "SMS failed; will retry", "user_id", h.UserID, "seq", h.Seq, "attempts", d.Attempts, "in", d.Delay, "err", sendErr)
	case DeadLettered:
		l.log.WarnContext(sctx, "SMS dead-lettered", "user_id", h.UserID, "seq", h.Seq, "attempts", d.Attempts, "reason", d.Reason)
	}
	return o
}

// tracer starts the lanes' send spans.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/notify/gate")
