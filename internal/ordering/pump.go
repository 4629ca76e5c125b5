package ordering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	retry "github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// errStopped ends a flight whose pump stopped between two of its batches.
var errStopped = errors.New("ordering: pump stopped")

// pump publishes one broker queue's records: it reads them with its own cursor, sends them
// to its queue, reads its next batch while one is in flight, and hands what the broker
// confirmed to the committer. It holds three kinds of records, its own set: the flight (being
// sent), the batch read ahead, and those confirmed but not yet marked (awaiting).
//
// Per key, the first publication of every record follows Seq order, because a pump takes a
// record only when its predecessor is published, or is in its own set (confirmed, in the
// flight it will follow, or earlier in the batch being built, which is in ID and so Seq
// order); a batch read ahead is sent only after the flight before it was confirmed, and is
// thrown away when that flight fails.
//
// Start sets it pumping; Stop ends its loop at once and returns once its flight has finished
// (within SendTimeout per batch) and handed its confirmations over.
type pump struct {
	*lifecycle.Runner
	relay *Relay
	com   *committer
	queue Queue
	slice Slice
	wake  chan struct{}
	// needRead asks the loop to read the outbox: at the start, after a failure, when the
	// relay's probe found records nobody holds, when an offered record cannot go without
	// one, and while a backlog or a deferred record is left.
	needRead atomic.Bool

	flights  sync.WaitGroup
	mu       sync.Mutex
	awaiting map[int64]struct{} // confirmed by the broker, not yet marked published
	recent   *recentIDs         // marked published lately: an offer of one comes too late
	deferred bool               // the last read left records for a predecessor to be marked
	offered  []OutboxRecord     // handed over in-process, not looked at yet
	flying   []OutboxRecord     // the flight's records
	ahead    []OutboxRecord     // to send after the flight

	sendSince    atomic.Int64 // unix nanos the flight started; 0 when none
	failingSince atomic.Int64 // unix nanos of the first failure in a row; 0 when none
	backoffUntil atomic.Int64 // unix nanos
	oldest       atomic.Int64 // unix nanos of the oldest record held unconfirmed; 0 when none
}

func newPump(r *Relay, com *committer, q Queue, s Slice) *pump {
	p := &pump{relay: r, com: com, queue: q, slice: s, wake: make(chan struct{}, 1), awaiting: map[int64]struct{}{},
		recent: newRecentIDs(recentPublished)}
	p.needRead.Store(true)
	p.Runner = lifecycle.NewRunner(p.run)
	return p
}

func (p *pump) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// requestRead asks the pump to read its queue's records from the outbox.
func (p *pump) requestRead() {
	p.needRead.Store(true)
	p.signal()
}

// offer hands the pump a record its process just committed: it sends it without reading
// the outbox when the record's predecessor is published or its own, and reads otherwise.
func (p *pump) offer(rec OutboxRecord) {
	p.mu.Lock()
	p.offered = append(p.offered, rec)
	p.mu.Unlock()
	p.signal()
}

// held appends to dst the IDs of every record the pump holds: offered, to send, in flight,
// or confirmed and not yet marked.
func (p *pump) held(dst []int64) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.awaiting {
		dst = append(dst, id)
	}
	for _, recs := range [][]OutboxRecord{p.offered, p.flying, p.ahead} {
		for _, r := range recs {
			dst = append(dst, r.ID)
		}
	}
	return dst
}

// hold records what the loop holds in flight and to send after it (for held).
func (p *pump) hold(fl *flight, next []OutboxRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flying, p.ahead = nil, next
	if fl != nil {
		p.flying = fl.recs
	}
}

// takeOffered takes the records offered since the last look and appends to next those
// that may go now: not held already nor published lately, with a predecessor that is
// published or held. It asks for a read when one may not go yet.
func (p *pump) takeOffered(fl *flight, next []OutboxRecord) []OutboxRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	offered := p.offered
	p.offered = nil
	if len(offered) == 0 {
		return next
	}
	own := p.ownLocked(fl, next)
	for _, r := range offered {
		if _, mine := own[r.ID]; mine || p.recent.has(r.ID) {
			continue
		}
		if _, ok := own[r.Pred]; r.Pred != 0 && !ok && !p.recent.has(r.Pred) {
			p.needRead.Store(true)
			continue
		}
		own[r.ID] = struct{}{}
		next = append(next, r)
	}
	return next
}

// ownLocked is the pump's own set, the IDs a record may follow without its predecessor
// being published: confirmed and awaiting their mark, in the flight fl, and in next (what is
// to be sent after it). The caller holds p.mu.
func (p *pump) ownLocked(fl *flight, next []OutboxRecord) map[int64]struct{} {
	own := make(map[int64]struct{}, len(p.awaiting)+len(next))
	for id := range p.awaiting {
		own[id] = struct{}{}
	}
	if fl != nil {
		for _, r := range fl.recs {
			own[r.ID] = struct{}{}
		}
	}
	for _, r := range next {
		own[r.ID] = struct{}{}
	}
	return own
}

// dropOffered forgets what was offered (a read will show it).
func (p *pump) dropOffered() {
	p.mu.Lock()
	p.offered = nil
	p.mu.Unlock()
}

// flight is a send in progress: recs go to the queue in order, in batches of MaxPerSend.
type flight struct {
	recs []OutboxRecord
	done chan error
}

// run pumps until ctx ends, then waits for its flight: the flight's goroutine finishes it,
// within SendTimeout per batch, and hands its confirmations over.
func (p *pump) run(ctx context.Context) error {
	defer p.flights.Wait()
	cfg := p.relay.cfg
	policy := retry.Policy{Base: cfg.RetryBackoff, Max: 10 * cfg.RetryBackoff}
	var (
		cur      Cursor
		next     []OutboxRecord // to send once the flight is done, in order
		fl       *flight
		failures int
		retryAt  time.Time
		deferAt  time.Time // oldest record the last read left waiting
	)
	fail := func(err error) {
		failures++
		now := time.Now()
		if failures == 1 {
			p.failingSince.Store(now.UnixNano())
		}
		retryAt = now.Add(policy.Delay(failures, nil))
		p.backoffUntil.Store(retryAt.UnixNano())
		if failures == 1 || failures%20 == 0 {
			p.relay.log.Warn("relay queue failing", "queue", p.queue.String(), "err", err, "failures", failures)
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		ready := !now.Before(retryAt)
		switch {
		case !ready:
		case failures > 0 && fl == nil:
			// Failing: what was offered meanwhile is read again, from the start.
			p.dropOffered()
			p.needRead.Store(true)
		default:
			next = p.takeOffered(fl, next)
		}
		// A read goes on from the cursor, which is past what it returned last: what is to be
		// sent is sent first.
		if ready && len(next) == 0 && p.needRead.Swap(false) {
			recs, c, at, more, err := p.read(ctx, cur, fl)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				p.needRead.Store(true)
				fail(fmt.Errorf("reading the outbox: %w", err))
			default:
				next, cur, deferAt = recs, c, at
				if more {
					p.needRead.Store(true) // read on while this batch is sent
				}
				if fl == nil && len(next) == 0 && failures > 0 {
					// Nothing is left to send: whatever was failing is over.
					failures = 0
					p.failingSince.Store(0)
				}
			}
		}
		if fl == nil && len(next) > 0 && ready {
			fl = p.send(ctx, next)
			next = nil
			p.hold(fl, next)
			p.track(fl, next, deferAt)
			continue // read on, or take what is offered, while this one is sent
		}
		p.hold(fl, next)
		p.track(fl, next, deferAt)
		wait := cfg.QueuePoll
		if d := time.Until(retryAt); d > 0 {
			wait = d
		}
		t.Reset(wait)
		var done chan error
		if fl != nil {
			done = fl.done
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			fl = nil
			if err != nil {
				// What is to be sent may hold successors of what just failed: throw it away
				// and read again from the start (what the flight's earlier batches stored is
				// awaiting its mark and is left out).
				next, cur = nil, Cursor{}
				p.needRead.Store(true)
				fail(err)
			} else if failures > 0 {
				failures = 0
				p.failingSince.Store(0)
			}
		case <-p.wake:
		case <-t.C:
			p.needRead.Store(true)
		}
		t.Stop()
	}
	return nil
}

// read reads the queue's next records from cur and takes those whose predecessor is
// published or in the pump's own set. It returns them in ID order, the cursor for the next
// read, the time of the oldest record it left waiting, and whether more are left to read
// (the read stopped at the batch size).
func (p *pump) read(ctx context.Context, cur Cursor, fl *flight) ([]OutboxRecord, Cursor, time.Time, bool, error) {
	cfg := p.relay.cfg
	p.mu.Lock()
	own := p.ownLocked(fl, nil)
	p.mu.Unlock()
	skip := make([]int64, 0, len(own))
	for id := range own {
		skip = append(skip, id)
	}
	page, err := p.relay.outbox.Pending(ctx, p.slice, cur, skip, cfg.Batch)
	if err != nil {
		return nil, cur, time.Time{}, false, err
	}
	var (
		taken     []OutboxRecord
		fresh     int
		lastFresh = cur.After
		waiting   int64 // the lowest ID left for its predecessor
		waitingAt time.Time
	)
	for i, r := range page.Records {
		if i > 0 && r.ID <= page.Records[i-1].ID {
			return nil, cur, time.Time{}, false, fmt.Errorf("outbox returned record %d after %d", r.ID, page.Records[i-1].ID)
		}
		if r.ID > cur.After {
			fresh++
			lastFresh = r.ID
		}
		if _, mine := own[r.ID]; mine {
			continue
		}
		if _, ok := own[r.Pred]; r.Pred != 0 && !ok {
			// The predecessor is unpublished and not this pump's: it comes first.
			if waiting == 0 {
				waiting = r.ID
			}
			if waitingAt.IsZero() || r.At.Before(waitingAt) {
				waitingAt = r.At
			}
			continue
		}
		own[r.ID] = struct{}{}
		taken = append(taken, r)
	}
	next := Cursor{After: max(page.Last, cur.After), Horizon: page.Horizon}
	if fresh >= cfg.Batch {
		next.After = lastFresh // the read stopped there
	}
	if waiting != 0 {
		next.After = min(next.After, waiting-1) // read it again
	}
	p.mu.Lock()
	p.deferred = waiting != 0
	p.mu.Unlock()
	return taken, next, waitingAt, fresh >= cfg.Batch, nil
}

// send starts a flight of recs.
func (p *pump) send(ctx context.Context, recs []OutboxRecord) *flight {
	fl := &flight{recs: recs, done: make(chan error, 1)}
	p.sendSince.Store(time.Now().UnixNano())
	p.flights.Go(func() {
		err := p.fly(ctx, fl)
		p.sendSince.Store(0)
		fl.done <- err
	})
	return fl
}

// fly sends a flight's batches in order, stopping at the first failure, and hands over what
// the broker stored. A batch is not cancelled half way (the broker might store it anyway):
// each runs to its SendTimeout; the flight stops between batches when ctx ends.
func (p *pump) fly(ctx context.Context, fl *flight) error {
	cfg := p.relay.cfg
	var (
		stored []Published
		err    error
	)
	for i := 0; i < len(fl.recs); i += cfg.MaxPerSend {
		if ctx.Err() != nil {
			err = errStopped
			break
		}
		chunk := fl.recs[i:min(i+cfg.MaxPerSend, len(fl.recs))]
		msgs := make([]Message, len(chunk))
		var spans []trace.Span // of the traced records, in chunk order
		for j, rec := range chunk {
			msgs[j] = Message{Topic: cfg.Topic, ShardingKey: rec.Key, Tag: rec.Tag, Keys: rec.Keys, Body: rec.Body}
			if rec.Traceparent != "" {
				span := p.sendSpan(ctx, rec)
				spans = append(spans, span)
				msgs[j].Properties = map[string]string{PropertyTraceparent: telemetry.Format(span.SpanContext())}
			}
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.SendTimeout)
		start := time.Now()
		res, serr := p.relay.sender.SendBatch(sctx, p.queue, msgs)
		cancel()
		if serr == nil && len(res) != len(chunk) {
			serr = fmt.Errorf("%d results for %d messages", len(res), len(chunk))
		}
		endSendSpans(spans, chunk, res, serr)
		if cfg.ObserveSend != nil {
			cfg.ObserveSend(time.Since(start), serr)
		}
		if serr != nil {
			p.relay.failed.Add(int64(len(fl.recs) - i))
			err = fmt.Errorf("queue %s: key %s seq %d (%d records): %w", p.queue, chunk[0].Key, chunk[0].Seq, len(chunk), serr)
			break
		}
		for j, rec := range chunk {
			stored = append(stored, Published{ID: rec.ID, MsgID: res[j].MsgID})
		}
	}
	if len(stored) > 0 {
		p.confirmed(stored)
	}
	return err
}

// confirmed keeps stored records in the pump's own set until the committer has marked them.
func (p *pump) confirmed(stored []Published) {
	p.mu.Lock()
	for _, s := range stored {
		p.awaiting[s.ID] = struct{}{}
	}
	p.mu.Unlock()
	p.relay.published.Add(int64(len(stored)))
	p.com.submit(stored, func(err error) {
		p.mu.Lock()
		for _, s := range stored {
			delete(p.awaiting, s.ID)
			if err == nil {
				p.recent.add(s.ID)
			}
		}
		wake := p.deferred
		p.mu.Unlock()
		if wake {
			p.requestRead() // a record left for its predecessor may go now
		}
	})
}

// track records the age of the oldest record the pump holds unconfirmed.
func (p *pump) track(fl *flight, next []OutboxRecord, deferAt time.Time) {
	oldest := deferAt
	older := func(recs []OutboxRecord) {
		for _, r := range recs {
			if oldest.IsZero() || r.At.Before(oldest) {
				oldest = r.At
			}
		}
	}
	if fl != nil {
		older(fl.recs)
	}
	older(next)
	var v int64
	if !oldest.IsZero() {
		v = oldest.UnixNano()
	}
	p.oldest.Store(v)
}

// stats reports the pump's state at now.
func (p *pump) stats(now time.Time) QueueStats {
	stuck := p.relay.cfg.StuckAfter.Nanoseconds()
	n := now.UnixNano()
	s := QueueStats{Queue: p.queue, State: QueueIdle}
	send, failing := p.sendSince.Load(), p.failingSince.Load()
	switch {
	case send != 0 && n-send > stuck, failing != 0 && n-failing > stuck:
		s.State = QueueStuck
	case send != 0:
		s.State = QueueSending
	case failing != 0 && p.backoffUntil.Load() > n:
		s.State = QueueBackingOff
	}
	if o := p.oldest.Load(); o != 0 && n > o {
		s.Lag = time.Duration(n - o)
	}
	return s
}

// PropertyTraceparent is the message property carrying the W3C traceparent of the relay's
// send span of the message: the consumer's work on it continues that trace.
const PropertyTraceparent = "traceparent"

// tracer starts the relay's send spans.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/ordering")

// sendSpan starts the send span of a traced record, a child of the span that wrote it.
func (p *pump) sendSpan(ctx context.Context, rec OutboxRecord) trace.Span {
	_, span := tracer.Start(telemetry.WithParent(ctx, rec.Traceparent), "outbox.send", trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.system", "rocketmq"),
			attribute.String("messaging.destination.name", p.relay.cfg.Topic),
			attribute.String("messaging.rocketmq.message.keys", strings.Join(rec.Keys, ",")),
			attribute.String("messaging.rocketmq.queue", p.queue.String()),
			attribute.Int64("outbox.id", rec.ID), attribute.Int64("outbox.seq", rec.Seq))
	}
	return span
}

// endSendSpans ends the send spans of the traced records of chunk with what the send did.
func endSendSpans(spans []trace.Span, chunk []OutboxRecord, res []SendResult, err error) {
	if len(spans) == 0 {
		return
	}
	i := 0
	for j, rec := range chunk {
		if rec.Traceparent == "" {
			continue
		}
		span := spans[i]
		i++
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case j < len(res) && span.IsRecording():
			span.SetAttributes(attribute.String("messaging.message.id", res[j].MsgID))
		}
		span.End()
	}
}

// recentPublished is how many of the IDs it marked published lately a pump remembers: an
// offer arriving after a read already sent and marked its record is not sent again.
const recentPublished = 4096

// recentIDs is a set of the last n IDs added.
type recentIDs struct {
	ring []int64
	next int
	set  map[int64]struct{}
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{ring: make([]int64, 0, n), set: make(map[int64]struct{}, n)}
}

func (r *recentIDs) add(id int64) {
	if _, ok := r.set[id]; ok {
		return
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % len(r.ring)
	}
	r.set[id] = struct{}{}
}

func (r *recentIDs) has(id int64) bool {
	_, ok := r.set[id]
	return ok
}
