package notify

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/walletsaga/walletsaga/internal/ordering"
)

// DeadLetterSink stores a dead letter in the DLQ topic (ordering.DeadLetterPublisher).
type DeadLetterSink interface {
	Publish(ctx context.Context, key, originMsgID, reason string, body []byte) error
}

// DLQPublisher carries out the dead-letter intents: every SMS the lanes dead-lettered and
// every undecodable message the inbox recorded is published to the DLQ topic, then marked
// published. The intent is recorded with the dead letter itself, so a crash between the two
// delays the publication but cannot skip it (the DLQ may then hold a dead letter twice; the
// reconciler reads both as one).
type DLQPublisher struct {
	store *Store
	sink  DeadLetterSink
	poll  time.Duration
	log   *slog.Logger
	wake  chan struct{}

	published atomic.Int64
	failing   atomic.Bool
}

// NewDLQPublisher returns a publisher; Run publishes. poll is how often it looks when nothing
// woke it (default 5s).
func NewDLQPublisher(store *Store, sink DeadLetterSink, poll time.Duration, log *slog.Logger) *DLQPublisher {
	if poll <= 0 {
		poll = 5 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &DLQPublisher{store: store, sink: sink, poll: poll, log: log.With("component", "dlq-publisher"), wake: make(chan struct{}, 1)}
}

// Wake tells the publisher there are new dead letters (it does not block).
func (p *DLQPublisher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Published returns how many dead letters it published since start.
func (p *DLQPublisher) Published() int64 { return p.published.Load() }

// Run publishes until ctx is cancelled.
func (p *DLQPublisher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
		full := p.publishSome(ctx)
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if full {
			t.Reset(0)
		} else {
			t.Reset(p.poll)
		}
	}
}

// publishSome publishes one page of intents; it reports whether there may be more.
func (p *DLQPublisher) publishSome(ctx context.Context) bool {
	const page = 100
	intents, err := p.store.deadLetterIntents(ctx, page)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading dead-letter intents failed; retrying", "err", err)
		}
		return false
	}
	done := make([]DeadLetterIntent, 0, len(intents))
	for _, d := range intents {
		if err := p.sink.Publish(ctx, d.Key(), d.MsgID, d.Reason, d.Body); err != nil {
			if !p.failing.Swap(true) {
				p.log.Warn("publishing dead letters to the DLQ topic failed; they stay recorded and are retried", "key", d.Key(), "err", err)
			}
			break
		}
		done = append(done, d)
	}
	if len(done) == 0 {
		return false
	}
	if err := p.store.markDeadLettersPublished(ctx, done); err != nil {
		p.log.Warn("marking dead letters published failed; they will be published again", "err", err)
		return false
	}
	if p.failing.Swap(false) {
		p.log.Info("publishing dead letters to the DLQ topic works again")
	}
	p.published.Add(int64(len(done)))
	return len(intents) == page && len(done) == len(intents)
}

// Reconciler is the DLQ watcher's function: everything found in the DLQ topic is recorded in
// Postgres — a wallet event as a dead-lettered (user, seq) unless the inbox has it already,
// anything else as a bad message — so a dead letter that reached the topic by another path
// (a crash, an older version, the client's own) cannot leave its user waiting or go unseen.
type Reconciler struct {
	store *Store
	log   *slog.Logger
	woke  func()
}

// NewReconciler returns the reconciler; woke is called when it recorded a dead letter (to
// wake the lanes, which move past it).
func NewReconciler(store *Store, woke func(), log *slog.Logger) *Reconciler {
	if log == nil {
		log = slog.Default()
	}
	if woke == nil {
		woke = func() {}
	}
	return &Reconciler{store: store, woke: woke, log: log.With("component", "dlq-reconciler")}
}

// Handle records one message found in the DLQ topic.
func (r *Reconciler) Handle(ctx context.Context, d ordering.Delivery) error {
	m := Decode(d)
	if m.Bad != "" {
		return r.store.recordBadMessage(ctx, m, true)
	}
	reason := "found in " + d.Topic + " without a record"
	if why := d.Properties[ordering.PropertyDeadLetterReason]; why != "" {
		reason += ": " + why
	}
	recorded, err := r.store.recordFoundInDLQ(ctx, m, reason)
	if err != nil {
		return err
	}
	if recorded {
		r.log.Warn("recorded a dead letter found in the DLQ that had no record", "user_id", m.UserID, "seq", m.Seq, "msg_id", d.MsgID)
		r.woke()
	}
	return nil
}
