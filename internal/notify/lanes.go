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

	"github.com/walletsaga/walletsaga/internal/backoff"
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
	// FeedLag, so that the change feed never skips a record that committed late), and
	// RecordAttempts is how many attempts one user's outcomes get (default 3) before the
	// worker gives the user back, to be claimed again under a new fence (whose lane sends
	// the SMS again under the same provider key).
	RecordTimeout  time.Duration
	RecordAttempts int
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

	sent, retried, dead, postponed, fenced, claims, recordFailures atomic.Int64
	recordsGivenUp, recordsRefused, leaseShort                     atomic.Int64
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
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = 5 * time.Second
	}
	if cfg.RecordAttempts <= 0 {
		cfg.RecordAttempts = 3
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
		RecordsGivenUp: l.recordsGivenUp.Load(), RecordsRefused: l.recordsRefused.Load(), LeaseShort: l.leaseShort.Load()}
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
	m.OccurredAt = ev.OccurredAt
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
			outs = []outcome{{UserID: h.UserID, Seq: h.Seq, Verdict: DeadLettered, Attempts: h.Attempts, Reason: reason,
				Age: h.Age + time.Since(h.ReadAt)}}
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
			return
		}
		done += len(outs)
		heads = res.r.Heads
	}
}

// giveBack releases the user under the claim's fence: due at once with requeue, else idle.
// It is bounded like a record attempt; if it fails, the lease runs out on its own.
func (l *Lanes) giveBack(ctx context.Context, c claim, requeue bool) {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RecordTimeout)
	defer cancel()
	if err := l.store.release(rctx, c.UserID, c.Fence, requeue); err != nil {
		l.log.Warn("giving a user back failed; its lease will expire", "user_id", c.UserID, "err", err)
	}
}

// deliver sends one SMS through the breaker, under its provider key and within the send
// timeout, and decides, with the retry policy, what becomes of it.
func (l *Lanes) deliver(ctx context.Context, h head, m SMS) outcome {
	m.IdempotencyKey = ProviderKey(l.deployment, h.UserID, h.Seq)
	o := outcome{UserID: h.UserID, Seq: h.Seq, Text: m.Text, Phone: m.Phone, Journal: l.journal}
	o.OccurredAt = m.OccurredAt
	done, counted, hold, err := l.cfg.Breaker.Allow(h.UserID)
	if err != nil {
		o.Verdict, o.Attempts, o.Delay, o.Reason = Postponed, h.Attempts, hold, "held back: the SMS provider breaker is open"
		o.Age = h.Age + time.Since(h.ReadAt)
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
	o.Verdict, o.Attempts, o.Delay, o.Reason, o.Age = d.Verdict, d.Attempts, d.Delay, d.Reason, a.Age
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

// commitRes answers a commitReq: what the store answered for the user, and the outcomes it
// recorded — the request's own, or, when the database refused one of them, those before it
// and the refused one's replacement (see recordAlone).
type commitRes struct {
	r    recorded
	outs []outcome
	err  error
}

// recordBackoff spaces a user's record attempts.
var recordBackoff = backoff.Policy{Base: 200 * time.Millisecond, Max: 2 * time.Second}

// commit records one user's outcomes under the claim's fence through the committers and
// waits, trying up to RecordAttempts times while the failure may pass (River's completer
// does the same: a closed pool, a cancelled context or data the database refuses are not
// tried again). ok is false when nothing more is to be done with the user: another lane
// claimed it (nothing was recorded), the record could not be made (the user is given back,
// to be claimed again under a new fence: its SMS is then sent again under the same provider
// key), or the process stops.
func (l *Lanes) commit(stop, ctx context.Context, c claim, outs []outcome) (commitRes, bool) {
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
				return commitRes{}, false
			}
			return res, true
		}
		l.recordFailures.Add(1)
		if attempt >= l.cfg.RecordAttempts || !recordRetryable(res.err) {
			l.recordsGivenUp.Add(1)
			l.log.Error("recording an outcome failed; giving the user back, to be claimed again under a new fence",
				"user_id", o.UserID, "seq", o.Seq, "attempts", attempt, "err", res.err)
			l.giveBack(ctx, c, true)
			return commitRes{}, false
		}
		l.log.Warn("recording an outcome failed; retrying", "user_id", o.UserID, "seq", o.Seq, "attempt", attempt, "err", res.err)
		t := time.NewTimer(recordBackoff.Delay(attempt, rand.Int64N))
		select {
		case <-t.C:
		case <-stop.Done():
			t.Stop()
			l.giveBack(ctx, c, true)
			return commitRes{}, false
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
		l.recordBatch(ctx, batch)
	}
}

// recordBatch records the outcomes of batch in one statement and answers each request. A
// statement the database refuses for the data of a row is split in halves, and each half
// recorded on its own, until the row's user is alone (recordAlone): one user's bad row never
// holds the others' records.
func (l *Lanes) recordBatch(ctx context.Context, batch []commitReq) {
	var outs []outcome
	for _, r := range batch {
		outs = append(outs, r.outs...)
	}
	got, err := l.recordOnce(ctx, outs)
	if err != nil && refusedData(err) {
		if len(batch) > 1 {
			l.recordBatch(ctx, batch[:len(batch)/2])
			l.recordBatch(ctx, batch[len(batch)/2:])
			return
		}
		batch[0].reply <- l.recordAlone(ctx, batch[0].outs, err)
		return
	}
	for _, r := range batch {
		r.reply <- commitRes{r: got[r.outs[0].UserID], outs: r.outs, err: err}
	}
}

// recordOnce is one attempt of a record statement, bounded by RecordTimeout.
func (l *Lanes) recordOnce(ctx context.Context, outs []outcome) (map[int64]recorded, error) {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RecordTimeout)
	defer cancel()
	return l.store.record(rctx, l.cfg.Lease, l.runLen(), outs)
}

// recordAlone records one user's outcomes after the database refused them for their data:
// a run of several one by one, to find the refused one, whose predecessors are recorded; the
// refused one is recorded as a failed attempt whose reason is the refusal (refusedOutcome),
// which an operator sees as the SMS's last error. Outcomes after it are dropped: only a
// journaled sender has runs, and its delivery is the record, so they are sent later.
func (l *Lanes) recordAlone(ctx context.Context, outs []outcome, refusal error) commitRes {
	var done commitRes
	for _, o := range outs {
		err := refusal
		if len(outs) > 1 {
			var got map[int64]recorded
			if got, err = l.recordOnce(ctx, []outcome{o}); err == nil {
				if done.r = got[o.UserID]; !done.r.Held {
					return done
				}
				done.outs = append(done.outs, o)
				continue
			}
		}
		if refusedData(err) {
			why := err
			sub := l.refusedOutcome(o, why)
			var got map[int64]recorded
			if got, err = l.recordOnce(ctx, []outcome{sub}); err == nil {
				if done.r = got[o.UserID]; done.r.Held {
					l.recordsRefused.Add(1)
					l.log.Error("the database refused an outcome; recorded as a failed attempt instead",
						"user_id", o.UserID, "seq", o.Seq, "verdict", o.Verdict, "recorded", sub.Verdict, "err", why)
					done.outs = append(done.outs, sub)
				}
				return done
			}
		}
		if len(done.outs) == 0 {
			return commitRes{err: err}
		}
		return done // what was recorded: the worker goes on from there
	}
	return done
}

// refusedOutcome replaces an outcome the database refused: the same SMS, a failed attempt
// whose error is the refusal, decided by the retry policy as a failed send is — retried, and
// dead-lettered once its attempts and window are spent — so it never wedges its user.
func (l *Lanes) refusedOutcome(o outcome, refusal error) outcome {
	d := l.cfg.Policy.Decide(Attempt{Prior: max(o.Attempts-1, 0), Age: o.Age,
		Err: fmt.Errorf("the database refused to record it as %s: %w", o.Verdict, refusal)}, rand.Int64N)
	return outcome{UserID: o.UserID, Seq: o.Seq, Verdict: d.Verdict, Attempts: d.Attempts, Delay: d.Delay,
		Reason: d.Reason, Fence: o.Fence, Age: o.Age}
}
