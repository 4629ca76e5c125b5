package notify

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgerrcode"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// InboxStats counts what the inbox received since start.
type InboxStats struct {
	Received  int64 `json:"received"`  // new SMS written to the inbox
	Ignored   int64 `json:"ignored"`   // redeliveries of SMS the inbox holds or finished already
	Bad       int64 `json:"bad"`       // undecodable messages recorded and dead-lettered
	Baselines int64 `json:"baselines"` // users that started past seq 1 (CONSUME_FROM=last)
}

// Inbox is the orderly consumer's handler: it records each batch of wallet events in the
// inbox in one transaction and acknowledges it, so a queue never waits for a user, a
// provider, or a predecessor on another queue. It fails a batch (the consumer pauses the
// queue and delivers the batch again) only when the database cannot take it.
type Inbox struct {
	store    *Store
	fromLast bool
	received func(Received) // what to wake: the lanes, the DLQ publisher
	log      *slog.Logger

	recv, ignored, bad, baselines atomic.Int64
}

// NewInbox returns the handler. fromLast: a user the inbox has never seen starts at the first
// seq it receives (a group that starts at the end of the topic); otherwise at seq 1.
// received is called after each batch is recorded.
func NewInbox(store *Store, fromLast bool, received func(Received), log *slog.Logger) *Inbox {
	if log == nil {
		log = slog.Default()
	}
	if received == nil {
		received = func(Received) {}
	}
	return &Inbox{store: store, fromLast: fromLast, received: received, log: log.With("component", "inbox")}
}

// Stats returns the counters.
func (in *Inbox) Stats() InboxStats {
	return InboxStats{Received: in.recv.Load(), Ignored: in.ignored.Load(), Bad: in.bad.Load(), Baselines: in.baselines.Load()}
}

// Handle records a batch of one queue's messages.
func (in *Inbox) Handle(ctx context.Context, batch []ordering.Delivery) error {
	msgs := make([]Inbound, len(batch))
	for i, d := range batch {
		msgs[i] = Decode(d)
		if msgs[i].Bad != "" {
			in.log.Warn("bad message: recorded and dead-lettered", "msg_id", d.MsgID, "queue", d.QueueLabel(), "offset", d.QueueOffset, "reason", msgs[i].Bad)
		} else if d.ShardingKey != "" && d.ShardingKey != strconv.FormatInt(msgs[i].UserID, 10) {
			// Sent under another key it may sit on another queue than its user's other
			// events; the lanes keep the order all the same, so only note it.
			in.log.Warn("event carries a foreign sharding key", "msg_id", d.MsgID, "sharding_key", d.ShardingKey, "user_id", msgs[i].UserID)
		}
	}
	r, err := in.store.Receive(ctx, msgs, in.fromLast)
	if isDataError(err) {
		// One message the database refuses must not hold its queue-mates: record one by
		// one, and the refused one as bad.
		return in.oneByOne(ctx, msgs)
	}
	if err != nil {
		return err
	}
	in.count(r)
	return nil
}

func (in *Inbox) oneByOne(ctx context.Context, msgs []Inbound) error {
	for _, m := range msgs {
		one := []Inbound{m}
		r, err := in.store.Receive(ctx, one, in.fromLast)
		if isDataError(err) {
			in.log.Warn("bad message: the database refused it; recorded and dead-lettered", "msg_id", m.MsgID, "err", err)
			one[0].Bad = "the database refused it: " + err.Error()
			r, err = in.store.Receive(ctx, one, in.fromLast)
		}
		if err != nil {
			return err
		}
		in.count(r)
	}
	return nil
}

func (in *Inbox) count(r Received) {
	in.recv.Add(int64(r.Inserted))
	in.ignored.Add(int64(r.Ignored))
	in.bad.Add(int64(r.Bad))
	in.baselines.Add(int64(r.Baselines))
	if r.Baselines > 0 {
		in.log.Warn("users first seen past seq 1 start there (CONSUME_FROM=last); see GET /v1/gate", "users", r.Baselines)
	}
	in.received(r)
}

// isDataError reports whether the database refused the data itself (SQLSTATE class 22: an
// invalid value), which retrying cannot fix.
func isDataError(err error) bool {
	return pgerrcode.IsDataException(pg.Code(err))
}

// Decode turns a broker message into what the inbox records: the wallet event's (user, seq)
// and the SMS text rendered from it, or, for a message that does not decode or render, the
// message kept as bad with its reason.
func Decode(d ordering.Delivery) Inbound {
	m := Inbound{MsgID: d.MsgID, Queue: d.QueueLabel(), Offset: d.QueueOffset, Body: d.Body}
	ev, err := walletevent.Decode(d.Body)
	if err != nil {
		m.Bad = err.Error()
		return m
	}
	sms, err := Render(ev)
	if err != nil {
		m.Bad = "render: " + err.Error()
		return m
	}
	m.UserID, m.Seq, m.Kind, m.Text = ev.UserID, ev.Seq, string(ev.Kind), sms.Text
	return m
}
