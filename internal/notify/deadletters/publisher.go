// Package deadletters handles the SMS the notifier gave up on, and the messages it could not
// read: the publisher puts each recorded dead letter into the DLQ topic, the reconciler
// records whatever it finds there without a record, and an operator replays a dead letter
// late or skips a seq that is truly lost. It owns notify.audit, the operators' trail.
package deadletters

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
)

// Sink stores a dead letter in the DLQ topic (the RocketMQ adapter's DLQ publisher).
type Sink interface {
	Publish(ctx context.Context, key, originMsgID, reason string, body []byte) error
}

// Intent is a dead letter to publish to the DLQ topic: a dead-lettered SMS, or an
// undecodable message.
type Intent struct {
	UserID int64 // 0 for an undecodable message
	Seq    int64
	MsgID  string
	Body   []byte
	Reason string
}

// Key is how the intent is known in the DLQ: "user:seq", or the message id of a bad message.
func (d Intent) Key() string {
	if d.UserID == 0 {
		return d.MsgID
	}
	return fmt.Sprintf("%d:%d", d.UserID, d.Seq)
}

// Publisher carries out the dead-letter intents: every SMS the lanes dead-lettered and every
// undecodable message the inbox recorded is published to the DLQ topic, then marked
// published. The intent is recorded with the dead letter itself, so a crash between the two
// delays the publication but cannot skip it (the DLQ may then hold a dead letter twice; the
// reconciler reads both as one). Start begins publishing; Stop returns once the round in
// hand has ended.
type Publisher struct {
	// Runner publishes in the background between Start and Stop.
	*lifecycle.Runner
	gate *gate.Store
	bad  *inbox.Store
	sink Sink
	poll time.Duration
	log  *slog.Logger
	wake chan struct{}

	published atomic.Int64
	failing   atomic.Bool
}

// NewPublisher returns a publisher of the gate's dead-lettered SMS and the inbox's bad
// messages to sink; Start publishes. poll is how often it looks when nothing woke it
// (default 5s).
func NewPublisher(g *gate.Store, bad *inbox.Store, sink Sink, poll time.Duration, log *slog.Logger) *Publisher {
	if poll <= 0 {
		poll = 5 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Publisher{gate: g, bad: bad, sink: sink, poll: poll, log: log.With("component", "dlq-publisher"), wake: make(chan struct{}, 1)}
	p.Runner = lifecycle.NewRunner(p.publish)
	return p
}

// Wake tells the publisher there are new dead letters (it does not block).
func (p *Publisher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Published returns how many dead letters it published since start.
func (p *Publisher) Published() int64 { return p.published.Load() }

// Backlog counts the dead letters recorded but not yet in the DLQ topic.
func (p *Publisher) Backlog(ctx context.Context) (int64, error) {
	sms, err := p.gate.UnpublishedDeadLetters(ctx)
	if err != nil {
		return 0, err
	}
	bad, err := p.bad.UnpublishedBad(ctx)
	if err != nil {
		return 0, err
	}
	return sms + bad, nil
}

// publish publishes until ctx is cancelled.
func (p *Publisher) publish(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
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

// page is how many intents of each kind publishSome takes at once.
const page = 100

// intents returns up to a page of each kind of intent, oldest first: dead-lettered SMS, then
// undecodable messages. more reports whether a kind filled its page.
func (p *Publisher) intents(ctx context.Context) (out []Intent, more bool, err error) {
	sms, err := p.gate.DeadLetterIntents(ctx, page)
	if err != nil {
		return nil, false, err
	}
	bad, err := p.bad.BadIntents(ctx, page)
	if err != nil {
		return nil, false, err
	}
	for _, d := range sms {
		out = append(out, Intent{UserID: d.UserID, Seq: d.Seq, MsgID: d.MsgID, Body: d.Event, Reason: d.Reason})
	}
	for _, b := range bad {
		out = append(out, Intent{MsgID: b.MsgID, Body: b.Body, Reason: b.Reason})
	}
	return out, len(sms) == page || len(bad) == page, nil
}

// publishSome publishes what intents returns; it reports whether there may be more.
func (p *Publisher) publishSome(ctx context.Context) bool {
	intents, more, err := p.intents(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("reading dead-letter intents failed; retrying", "err", err)
		}
		return false
	}
	var sms []gate.DeadLetter
	var bad []string
	for _, d := range intents {
		if err := p.sink.Publish(ctx, d.Key(), d.MsgID, d.Reason, d.Body); err != nil {
			if !p.failing.Swap(true) {
				p.log.Warn("publishing dead letters to the DLQ topic failed; they stay recorded and are retried", "key", d.Key(), "err", err)
			}
			more = false
			break
		}
		if d.UserID == 0 {
			bad = append(bad, d.MsgID)
		} else {
			sms = append(sms, gate.DeadLetter{UserID: d.UserID, Seq: d.Seq})
		}
	}
	if len(sms)+len(bad) == 0 {
		return false
	}
	if len(sms) > 0 {
		if err := p.gate.MarkDeadLettersPublished(ctx, sms); err != nil {
			p.log.Warn("marking dead letters published failed; they will be published again", "err", err)
			return false
		}
	}
	if len(bad) > 0 {
		if err := p.bad.MarkBadPublished(ctx, bad); err != nil {
			p.log.Warn("marking bad messages published failed; they will be published again", "err", err)
			return false
		}
	}
	if p.failing.Swap(false) {
		p.log.Info("publishing dead letters to the DLQ topic works again")
	}
	p.published.Add(int64(len(sms) + len(bad)))
	return more
}
