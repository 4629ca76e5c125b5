package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

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
	// Poll is how often the dispatcher looks for due users when nothing woke it: retries
	// coming due, and SMS another replica's consumer received (default 500ms).
	Poll time.Duration
	// RunMax is how many SMS a worker sends to one user before it lets other users have a
	// turn (default 100).
	RunMax int
	Policy RetryPolicy
	// Breaker holds sends back while the provider as a whole fails; nil: a default one.
	Breaker *Breaker
	Sender  Sender
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
	// RecordFailures counts record statements that failed (the database away, a conflict)
	// and were tried again.
	RecordFailures int64 `json:"record_failures"`
	// LeaseShort counts users given back unsent because their lease had less than twice
	// the send timeout left.
	LeaseShort int64 `json:"lease_short"`
}

// Lanes delivers the inbox: a dispatcher claims users whose next SMS is due (FOR UPDATE
// SKIP LOCKED, so replicas share them; each claim takes a new fence) and hands each to a
// worker, which sends that user's SMS in seq order — each only once its predecessor is
// recorded sent or dead-lettered — and records each outcome, under its claim's fence,
// through committers that group the outcomes of all workers into few transactions.
// Different users proceed in parallel; a failing or slow user holds only its own worker.
type Lanes struct {
	store   *Store
	cfg     LaneConfig
	log     *slog.Logger
	journal bool
	wake    chan struct{}
	freed   chan struct{}
	commits chan commitReq
	busy    atomic.Int64
	// deployment is the notifier tables' deployment id, read once by Run: part of every
	// provider key.
	deployment string

	sent, retried, dead, postponed, fenced, claims, recordFailures, leaseShort atomic.Int64
}

// NewLanes returns the lanes over store; Run delivers.
func NewLanes(store *Store, cfg LaneConfig) (*Lanes, error) {
	if cfg.Sender == nil {
		return nil, errors.New("notify: lanes need a sender")
	}
	if cfg.Owner == "" {
		return nil, errors.New("notify: lanes need an owner name")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = DefaultWebhookTimeout
	}
	if cfg.Lease <= 2*cfg.SendTimeout {
		return nil, fmt.Errorf("notify: a lane lease of %s leaves no time to send: it must be more than twice the send timeout (%s)", cfg.Lease, cfg.SendTimeout)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.RunMax <= 0 {
		cfg.RunMax = 100
	}
	if cfg.Breaker == nil {
		cfg.Breaker = NewBreaker(BreakerConfig{})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lanes{
		store: store, cfg: cfg, log: cfg.Logger.With("component", "lanes"), journal: IsJournaled(cfg.Sender),
		wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), commits: make(chan commitReq, cfg.Workers),
	}, nil
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
func (l *Lanes) Breaker() *Breaker { return l.cfg.Breaker }

// Stats returns the counters.
func (l *Lanes) Stats() LaneStats {
	return LaneStats{Sent: l.sent.Load(), Retried: l.retried.Load(), DeadLettered: l.dead.Load(),
		Postponed: l.postponed.Load(), Fenced: l.fenced.Load(), Claims: l.claims.Load(), RecordFailures: l.recordFailures.Load(),
		LeaseShort: l.leaseShort.Load()}
}

// Run delivers until ctx is cancelled, then lets each worker finish the SMS in hand, record
// it and give its user back, and returns. It first reads the deployment id (retrying while
// the database is away) and gives back the leases its owner name still holds from a
// previous run; a predecessor that still runs can then record nothing more.
func (l *Lanes) Run(ctx context.Context) error {
	for {
		d, err := l.store.deploymentID(ctx)
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
	var recording sync.WaitGroup
	for range committers {
		recording.Go(func() { l.commitLoop(work) })
	}

	var wg sync.WaitGroup
	l.dispatch(ctx, work, &wg)
	wg.Wait()
	close(l.commits)
	recording.Wait()
	return nil
}

// dispatch claims due users and starts a worker for each, until ctx is cancelled.
func (l *Lanes) dispatch(ctx, work context.Context, wg *sync.WaitGroup) {
	br := l.cfg.Breaker
	poll := time.NewTimer(0)
	defer poll.Stop()
	for ctx.Err() == nil {
		if wait := br.Wait(); wait > 0 {
			l.sleep(ctx, wait, br.Changed())
			continue
		}
		free := l.cfg.Workers - int(l.busy.Load())
		if free <= 0 {
			select {
			case <-ctx.Done():
			case <-l.freed:
			}
			continue
		}
		probe := br.HalfOpen()
		if probe {
			free = 1 // one SMS tells whether the provider is back
		}
		// The lease ends no sooner than this process's clock says: the database's now(),
		// from which it counts, is read after the statement leaves.
		leaseEnd := time.Now().Add(l.cfg.Lease)
		claims, err := l.store.claimUsers(ctx, l.cfg.Owner, free, l.cfg.Lease, l.runLen())
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("claiming users failed; retrying", "err", err)
				l.sleep(ctx, l.cfg.Poll, nil)
			}
			continue
		}
		l.claims.Add(int64(len(claims)))
		for _, c := range claims {
			l.busy.Add(1)
			wg.Add(1)
			go func() {
				defer func() {
					l.busy.Add(-1)
					wg.Done()
					select {
					case l.freed <- struct{}{}:
					default:
					}
				}()
				l.work(ctx, work, c, leaseEnd)
			}()
		}
		switch {
		case probe:
			l.sleep(ctx, l.cfg.Poll, br.Changed())
		case len(claims) < free:
			// Nothing more is due: wait for news, a freed worker's user coming due again,
			// or the poll.
			poll.Reset(l.cfg.Poll)
			select {
			case <-ctx.Done():
			case <-l.wake:
			case <-poll.C:
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

// step is what a lane does with a user's head.
type step int

const (
	stepRelease    step = iota // no head in the inbox: give the user back
	stepAdvance                // the head is finished already: move past it
	stepDeadLetter             // the head cannot be rendered: dead-letter it at once
	stepSend                   // send it
)

// plan decides what to do with a head. It is pure.
func plan(h head) (step, SMS, string) {
	switch h.Status {
	case "":
		return stepRelease, SMS{}, ""
	case StatusSent, StatusDeadLettered, StatusSkipped:
		return stepAdvance, SMS{}, ""
	}
	ev, err := walletevent.Decode(h.Event)
	if err != nil {
		return stepDeadLetter, SMS{}, "the stored event no longer decodes: " + err.Error()
	}
	if ev.UserID != h.UserID || ev.Seq != h.Seq {
		return stepDeadLetter, SMS{}, fmt.Sprintf("the stored event is for %s, not %d:%d", ev.SeqKey(), h.UserID, h.Seq)
	}
	m, err := Render(ev)
	if err != nil {
		return stepDeadLetter, SMS{}, "the stored event no longer renders: " + err.Error()
	}
	return stepSend, m, ""
}

// runLen is how many of a user's waiting SMS a worker takes at once: with a journaled sender
// (whose delivery is the row the record writes) a run of them goes into one record; any
// other sender's SMS are sent and recorded one at a time.
func (l *Lanes) runLen() int {
	if l.journal {
		return 32
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
// process's clock) is left to send, or the process stops.
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
			outs = []outcome{{UserID: h.UserID, Seq: h.Seq, Verdict: DeadLettered, Attempts: h.Attempts, Reason: reason}}
			l.log.Error("dead-lettering an SMS whose stored event is unusable", "user_id", h.UserID, "seq", h.Seq, "reason", reason)
		case stepSend:
			if left := time.Until(leaseEnd); !sendable(left, l.cfg.SendTimeout) {
				l.leaseShort.Add(1)
				l.log.Warn("giving a user back unsent: too little of its lease is left to send and record",
					"user_id", h.UserID, "seq", h.Seq, "lease_left", left.Round(time.Millisecond), "send_timeout", l.cfg.SendTimeout)
				l.giveBack(ctx, c, true)
				return
			}
			outs = []outcome{l.deliver(ctx, h, sms)}
			// A journaled sender's further waiting SMS join the run, up to the first that is
			// not sent.
			for _, next := range heads[1:] {
				if outs[len(outs)-1].Verdict != Sent || !sendable(time.Until(leaseEnd), l.cfg.SendTimeout) {
					break
				}
				ns, nsms, _ := plan(next)
				if ns != stepSend {
					break
				}
				outs = append(outs, l.deliver(ctx, next, nsms))
			}
		}
		began := time.Now()
		r, ok := l.commit(stop, ctx, c, outs)
		if !ok {
			return
		}
		// The record renewed the lease from its statement's start, which was after began.
		leaseEnd = began.Add(l.cfg.Lease)
		for _, o := range outs {
			switch o.Verdict {
			case Sent:
				l.sent.Add(1)
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
		if v := outs[len(outs)-1].Verdict; v == Retry || v == Postponed || r.Released {
			return
		}
		done += len(outs)
		heads = r.Heads
	}
}

// giveBack releases the user under the claim's fence: due at once with requeue, else idle.
// If it fails, the lease runs out on its own.
func (l *Lanes) giveBack(ctx context.Context, c claim, requeue bool) {
	if err := l.store.release(ctx, c.UserID, c.Fence, requeue); err != nil {
		l.log.Warn("giving a user back failed; its lease will expire", "user_id", c.UserID, "err", err)
	}
}

// deliver sends one SMS through the breaker, under its provider key and within the send
// timeout, and decides, with the retry policy, what becomes of it.
func (l *Lanes) deliver(ctx context.Context, h head, m SMS) outcome {
	m.IdempotencyKey = ProviderKey(l.deployment, h.UserID, h.Seq)
	o := outcome{UserID: h.UserID, Seq: h.Seq, Text: m.Text, Phone: m.Phone, Journal: l.journal}
	done, counted, hold, err := l.cfg.Breaker.Allow(h.UserID)
	if err != nil {
		o.Verdict, o.Attempts, o.Delay, o.Reason = Postponed, h.Attempts, hold, "held back: the SMS provider breaker is open"
		return o
	}
	sctx, cancel := context.WithTimeout(ctx, l.cfg.SendTimeout)
	sendErr := l.cfg.Sender.Send(sctx, m)
	cancel()
	done(sendErr)
	a := Attempt{Prior: h.Attempts, Age: h.Age + time.Since(h.ReadAt), Err: sendErr}
	if sendErr != nil && !counted && errors.Is(sendErr, ErrProviderUnavailable) {
		a.Held = max(l.cfg.Breaker.Wait(), l.cfg.Breaker.cfg.Open)
	}
	d := l.cfg.Policy.Decide(a, rand.Int64N)
	o.Verdict, o.Attempts, o.Delay, o.Reason = d.Verdict, d.Attempts, d.Delay, d.Reason
	switch d.Verdict {
	case Retry:
		l.log.Info("SMS failed; will retry", "user_id", h.UserID, "seq", h.Seq, "attempts", d.Attempts, "in", d.Delay, "err", sendErr)
	case DeadLettered:
		l.log.Warn("SMS dead-lettered", "user_id", h.UserID, "seq", h.Seq, "attempts", d.Attempts, "reason", d.Reason)
	}
	return o
}

// commitReq is one user's outcomes waiting to be recorded, and where to answer.
type commitReq struct {
	outs  []outcome
	reply chan commitRes
}

type commitRes struct {
	r   recorded
	err error
}

// commit records one user's outcomes under the claim's fence through the committer and
// waits; ok is false when another lane claimed the user (nothing was recorded) or the
// process is stopping (ctx).
func (l *Lanes) commit(stop, ctx context.Context, c claim, outs []outcome) (recorded, bool) {
	for i := range outs {
		outs[i].Fence = c.Fence
	}
	o := outs[0]
	for attempt := 1; ; attempt++ {
		reply := make(chan commitRes, 1)
		l.commits <- commitReq{outs: outs, reply: reply}
		res := <-reply
		if res.err == nil {
			if !res.r.Held {
				l.fenced.Add(1)
				l.log.Warn("outcome not recorded: the user was claimed again under a new fence", "user_id", o.UserID, "seq", o.Seq, "verdict", o.Verdict)
				// A no-op unless an earlier attempt of this record committed and its
				// answer was lost.
				l.giveBack(ctx, c, true)
				return recorded{}, false
			}
			return res.r, true
		}
		l.recordFailures.Add(1)
		// The SMS went out; its record must follow. Keep trying while the database is
		// away; if the process stops meanwhile, the lease expires and the next lane sends
		// it again under the same idempotency key.
		l.log.Warn("recording an outcome failed; retrying", "user_id", o.UserID, "seq", o.Seq, "attempt", attempt, "err", res.err)
		t := time.NewTimer(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second))
		select {
		case <-t.C:
		case <-stop.Done():
			t.Stop()
			return recorded{}, false
		}
	}
}

// committers is how many record statements the lanes run at once. One would serialise the
// lanes behind it: on a machine whose CPUs the wallet's busy backends share, a record of a few
// hundred outcomes can take a second, and every worker waits for it. Records of one process
// never touch the same user (each user is held by one worker), so they do not wait for each
// other.
const committers = 4

// commitLoop records outcomes in groups: it takes whatever outcomes are waiting (those of up
// to one user per worker) and writes them in one statement, so a thousand SMS a second cost
// tens of commits, not a thousand. Several run at once; each returns when l.commits is
// closed.
func (l *Lanes) commitLoop(ctx context.Context) {
	batch := make([]commitReq, 0, l.cfg.Workers)
	for first := range l.commits {
		batch = append(batch[:0], first)
	more:
		for len(batch) < cap(batch) {
			select {
			case r, ok := <-l.commits:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		var outs []outcome
		for _, r := range batch {
			outs = append(outs, r.outs...)
		}
		got, err := l.store.record(ctx, l.cfg.Lease, l.runLen(), outs)
		for _, r := range batch {
			r.reply <- commitRes{r: got[r.outs[0].UserID], err: err}
		}
	}
}
