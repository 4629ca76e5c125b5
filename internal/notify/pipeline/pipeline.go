// Package pipeline is the notifier's message path: decode the wallet event, render its SMS,
// and pass it through the ordering gate to the sender; and the reconciler that makes sure
// every message in the dead-letter queue is recorded.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Pipeline handles one wallet event message at a time per queue.
type Pipeline struct {
	pool   *pgxpool.Pool
	gate   *ordering.Gate
	sender notify.Sender
	log    *slog.Logger

	// mayHaveParked is false only when this process parked nothing since its last look
	// found nothing to drain: the parked-messages query then need not run after every SMS
	// (a sweep every RunDrainer interval covers messages parked by other processes).
	mayHaveParked atomic.Bool
}

// New returns a pipeline.
func New(pool *pgxpool.Pool, gate *ordering.Gate, sender notify.Sender, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.Default()
	}
	p := &Pipeline{pool: pool, gate: gate, sender: sender, log: log.With("component", "pipeline")}
	p.mayHaveParked.Store(true)
	return p
}

// IsPermanent classifies sender errors for the gate.
func IsPermanent(err error) bool { return errors.Is(err, notify.ErrPermanent) }

// Handle is the orderly consumer's handler. A message that cannot be decoded is recorded
// with its reason and dead-lettered; it never blocks its queue.
func (p *Pipeline) Handle(ctx context.Context, d ordering.Delivery) ordering.Result {
	ev, err := walletevent.Decode(d.Body)
	if err != nil {
		return p.bad(ctx, d, err.Error())
	}
	sms, err := notify.Render(ev)
	if err != nil {
		return p.bad(ctx, d, "render: "+err.Error())
	}
	if d.ShardingKey != "" && d.ShardingKey != ev.ShardingKey() {
		// Sent under another key, it may sit on another queue than its user's other events;
		// the gate still keeps the order, so only note it.
		p.log.Warn("event carries a foreign sharding key", "msg_id", d.MsgID, "sharding_key", d.ShardingKey, "user_id", ev.UserID)
	}
	it := ordering.GateItem{UserID: ev.UserID, Seq: ev.Seq, MsgID: d.MsgID, Event: d.Body, Kind: string(ev.Kind), Text: sms.Text}
	dec := p.gate.Handle(ctx, it, func(ctx context.Context, tx pgx.Tx) error { return p.sender.Send(ctx, tx, sms) })
	p.log.Debug("gate", "user_id", ev.UserID, "seq", ev.Seq, "verdict", dec.Verdict, "attempts", dec.Attempts, "queue", d.QueueLabel())
	switch dec.Verdict {
	case ordering.Parked:
		p.mayHaveParked.Store(true)
	case ordering.Sent, ordering.DeadLettered:
		// Successors of this one may be parked: deliver them now rather than at the next
		// sweep — if anything may be parked at all.
		if p.mayHaveParked.Load() {
			p.mayHaveParked.Store(false)
			p.DrainParked(ctx)
			if n, err := p.gate.ParkedCount(ctx); err != nil || n > 0 {
				p.mayHaveParked.Store(true)
			}
		}
	}
	return dec.Result
}

// DrainParked delivers, in order, the parked messages whose predecessor is now finished. It
// returns how many it delivered or dead-lettered; the rest wait for the next call.
func (p *Pipeline) DrainParked(ctx context.Context) int {
	n := 0
	for ctx.Err() == nil {
		items, err := p.gate.ParkedReady(ctx, 100)
		if err != nil {
			p.log.Warn("reading parked messages failed", "err", err)
			return n
		}
		progressed := 0
		for _, it := range items {
			ev, err := walletevent.Decode(it.Event)
			if err != nil {
				p.log.Error("a parked event no longer decodes", "user_id", it.UserID, "seq", it.Seq, "err", err)
				continue
			}
			sms, err := notify.Render(ev)
			if err != nil {
				p.log.Error("a parked event no longer renders", "user_id", it.UserID, "seq", it.Seq, "err", err)
				continue
			}
			dec := p.gate.Handle(ctx, it, func(ctx context.Context, tx pgx.Tx) error { return p.sender.Send(ctx, tx, sms) })
			if dec.Verdict == ordering.Sent || dec.Verdict == ordering.DeadLettered {
				progressed++
			}
		}
		n += progressed
		if progressed == 0 {
			return n
		}
	}
	return n
}

// RunDrainer sweeps parked messages every interval until ctx is done: it delivers those whose
// predecessor was finished by another process, and retries parked deliveries that failed.
func (p *Pipeline) RunDrainer(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if p.DrainParked(ctx) > 0 {
				p.mayHaveParked.Store(true)
			}
		}
	}
}

// bad records an undecodable message (once per message id) and dead-letters it.
func (p *Pipeline) bad(ctx context.Context, d ordering.Delivery, reason string) ordering.Result {
	if err := RecordBadMessage(ctx, p.pool, d, reason); err != nil {
		p.log.Error("recording a bad message failed; retrying", "msg_id", d.MsgID, "err", err)
		return ordering.Wait(0)
	}
	p.log.Warn("bad message dead-lettered", "msg_id", d.MsgID, "queue", d.QueueLabel(), "offset", d.QueueOffset, "reason", reason)
	return ordering.DeadLetter()
}

// RecordBadMessage stores an undecodable message with its reason, once per message id.
func RecordBadMessage(ctx context.Context, pool *pgxpool.Pool, d ordering.Delivery, reason string) error {
	body := d.Body
	if body == nil {
		body = []byte{}
	}
	_, err := pool.Exec(ctx, `INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (msg_id) DO NOTHING`, d.MsgID, d.QueueLabel(), d.QueueOffset, body, reason)
	return err
}

// Reconcile is the DLQ watcher's function: every dead letter ends up recorded, either as a
// dead-lettered (user, seq) — which lets the user's later messages proceed — or as a bad
// message. A crash between the gate's record and the send-back, or a message the client
// dead-lettered on its own, cannot leave a user waiting forever.
func (p *Pipeline) Reconcile(ctx context.Context, d ordering.Delivery) error {
	ev, err := walletevent.Decode(d.Body)
	if err != nil {
		return RecordBadMessage(ctx, p.pool, d, err.Error())
	}
	text := ""
	if sms, err := notify.Render(ev); err == nil {
		text = sms.Text
	}
	it := ordering.GateItem{UserID: ev.UserID, Seq: ev.Seq, MsgID: d.MsgID, Event: d.Body, Kind: string(ev.Kind), Text: text}
	recorded, err := p.gate.RecordDeadLetter(ctx, it, "found in "+d.Topic+" without a record")
	if err != nil {
		return fmt.Errorf("reconcile %d:%d: %w", ev.UserID, ev.Seq, err)
	}
	if recorded {
		p.log.Warn("reconciler recorded a dead letter the gate had not", "user_id", ev.UserID, "seq", ev.Seq, "msg_id", d.MsgID)
	}
	return nil
}
