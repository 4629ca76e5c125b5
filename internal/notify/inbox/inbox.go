// Package inbox consumes the broker's wallet events, then writes them: each message of a
// queue's batch is decoded and its SMS rendered; the good ones arrive at the gate
// (gate.Store.Arrive), the bad ones are recorded with a dead-letter intent in
// notify.bad_messages, which this package owns, all in one transaction; then the batch is
// acknowledged. The batches of all queues are written through one writer that groups what
// arrives within a short linger into one transaction (groupcommit), so several queues share a
// commit; each batch is acknowledged only once its own rows are committed. A queue never
// waits for a user, a provider, or a predecessor on another queue.
package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Message is one broker message as the notifier receives it: the project's own type, into
// which the RocketMQ adapter's wiring converts what its consumers deliver.
type Message struct {
	MsgID       string
	Topic       string
	Queue       string // the queue it came from, "<broker>/<queue id>"
	Offset      int64  // its offset in that queue
	ShardingKey string
	Body        []byte
	// DeadLetterReason says why the message was dead-lettered, when it was read from the
	// DLQ topic and its publisher said.
	DeadLetterReason string
	// Traceparent is the W3C traceparent the message carried (the relay's send span), ""
	// when none: the inbox span that records it is its child.
	Traceparent string
	// MayBaseline says the message is of the first batch of a queue that the group's very
	// first start began at its end (CONSUME_FROM=last): a user the gate has never seen may
	// start at its seq (gate.Arrival.MayBaseline). Everywhere else a new user starts at 1.
	MayBaseline bool
}

// Decoded is a message as the notifier takes it: a wallet event arriving at the gate, or,
// when Bad is set, a message that does not decode or render, kept with its reason.
type Decoded struct {
	gate.Arrival
	Offset int64
	Bad    string // why the message could not be decoded; empty for a good one
}

// What is kept of a bad message, in notify.bad_messages and in the log line that reports it:
// a broker message may be megabytes long, and a decoder's error may quote it.
const (
	// MaxBadReason bounds the reason, in characters: a longer one is cut and ends with
	// freetext.Ellipsis.
	MaxBadReason = 1024
	// MaxBadBody bounds the body kept, in bytes: a longer one is cut (between two
	// characters, when it is text) and ends with a marker that gives its whole length.
	MaxBadBody = 64 << 10
)

// markBad keeps d as bad for reason, both it and the body bounded (MaxBadReason,
// MaxBadBody).
func (d *Decoded) markBad(reason string) {
	d.Bad = freetext.Clip(reason, MaxBadReason)
	d.Event = clipBody(d.Event)
}

// clipBody returns b, or, beyond MaxBadBody bytes, its start and a marker in MaxBadBody.
func clipBody(b []byte) []byte {
	if len(b) <= MaxBadBody {
		return b
	}
	marker := fmt.Sprintf("…[cut: %d bytes in all]", len(b))
	n := MaxBadBody - len(marker)
	if utf8.Valid(b) {
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
	}
	out := make([]byte, 0, n+len(marker))
	return append(append(out, b[:n]...), marker...)
}

// Decode turns a broker message into what the inbox records: the wallet event's (user, seq)
// and the SMS text rendered from it, or, for a message that does not decode or render, the
// message kept as bad with its reason (both bounded: MaxBadReason, MaxBadBody). This is the
// one render of an SMS: the inbox stores the text, and the lanes send that text as stored
// (nothing needs it rendered again at send time: the locale is the event's, and the provider
// deduplicates on the key, not the text).
func Decode(m Message) Decoded {
	d := Decoded{Arrival: gate.Arrival{MsgID: m.MsgID, Queue: m.Queue, Event: m.Body, MayBaseline: m.MayBaseline}, Offset: m.Offset}
	ev, err := walletevent.Decode(m.Body)
	if err != nil {
		d.markBad(err.Error())
		return d
	}
	sms, err := notify.Render(ev)
	if err != nil {
		d.markBad("render: " + err.Error())
		return d
	}
	d.UserID, d.Seq, d.Kind, d.Text = ev.UserID, ev.Seq, string(ev.Kind), sms.Text
	d.Epoch, d.EpochSince = ev.Epoch, ev.EpochSince
	return d
}

// Stats counts what the inbox received since start.
type Stats struct {
	Received  int64 `json:"received"`  // new SMS written to the inbox
	Ignored   int64 `json:"ignored"`   // redeliveries of SMS the inbox holds or finished already
	Bad       int64 `json:"bad"`       // undecodable messages recorded and dead-lettered
	Baselines int64 `json:"baselines"` // users that started past seq 1 (CONSUME_FROM=last's first batches)
	// Rewound counts the users whose history the wallet rewound (a restore) with something
	// of it set aside; Superseded the arrivals of a rewound history set aside, never sent.
	Rewound    int64 `json:"rewound"`
	Superseded int64 `json:"superseded"`
	// Writes counts the write transactions run: fewer than the batches received when the
	// queues' batches share commits.
	Writes int64 `json:"writes"`
}

// Received is what one write of the inbox did.
type Received struct {
	Inserted   int // new (user, seq) rows in the inbox
	Ignored    int // redeliveries of what the inbox holds or finished already
	Bad        int // undecodable messages recorded for the DLQ
	Baselines  int // users first seen past seq 1 that start there (Message.MayBaseline)
	Duplicates int // bad messages seen before
	Rewound    int // users whose rewound history was set aside (see gate.History)
	Superseded int // arrivals of a rewound history set aside, never sent
	// Woken counts the users with new rows left to the lanes' claims; the others the write
	// claimed itself, for the lanes it hands them to (HandTo).
	Woken int
}

// Inbox is the orderly consumer's handler: it records each batch of wallet events, in one
// transaction with whatever other queues' batches arrive within the writer's linger, and
// acknowledges it once that transaction has committed. It fails a batch (the consumer pauses
// the queue and delivers the batch again) only when the database cannot take it.
//
// Start starts the writer, which Handle needs; Stop, once no more batches are handled,
// writes what waits and returns.
type Inbox struct {
	store    *Store
	gate     *gate.Store
	lanes    *gate.Lanes    // nil: no lanes here, every user with news is woken
	received func(Received) // what to wake: the lanes, the DLQ publisher
	log      *slog.Logger
	writer   *groupcommit.Committer[writeReq]

	recv, ignored, bad, baselines, writes atomic.Int64
	rewound, superseded                   atomic.Int64
}

// writeReq is one queue's batch waiting for the writer, and where to answer.
type writeReq struct {
	msgs  []Decoded
	reply chan error
}

// Writer tuning: a lone batch waits at most writeLinger for other queues' batches to share
// its commit (the latency it adds at low load); a group holds at most writeMaxRows messages;
// writeTimeout bounds one statement, whose failure the consumer retries.
const (
	writeLinger  = 2 * time.Millisecond
	writeMaxRows = 512
	writeTimeout = 10 * time.Second
)

// NewInbox returns the handler, which writes good messages through g and bad ones to store.
// A user the gate has never seen starts at seq 1, or at the first seq it receives in a
// message with MayBaseline. received is called after each batch is recorded.
func NewInbox(store *Store, g *gate.Store, received func(Received), log *slog.Logger) *Inbox {
	if log == nil {
		log = slog.Default()
	}
	if received == nil {
		received = func(Received) {}
	}
	in := &Inbox{store: store, gate: g, received: received, log: log.With("component", "inbox")}
	in.writer = groupcommit.New(groupcommit.Config{Linger: writeLinger, MaxRows: writeMaxRows, Writers: 2}, in.writeGroup)
	return in
}

// HandTo makes the inbox's writes claim, for l, the idle users whose next SMS they bring
// (as many as l has workers free), and hand them to l's workers once committed: such a user
// costs no wake row and no claim statement. Call it before Start.
func (in *Inbox) HandTo(l *gate.Lanes) { in.lanes = l }

// Start starts the writer.
func (in *Inbox) Start(ctx context.Context) error { return in.writer.Start(ctx) }

// Stop writes the batches that wait and stops the writer; call it once Handle is no longer
// called.
func (in *Inbox) Stop(ctx context.Context) error { return in.writer.Stop(ctx) }

// Stats returns the counters.
func (in *Inbox) Stats() Stats {
	return Stats{Received: in.recv.Load(), Ignored: in.ignored.Load(), Bad: in.bad.Load(), Baselines: in.baselines.Load(),
		Rewound: in.rewound.Load(), Superseded: in.superseded.Load(),
		Writes: in.writes.Load()}
}

// WriterStats returns what the writer wrote: groups of the queues' batches (requests), each
// written in one transaction unless the database refused one of its messages.
func (in *Inbox) WriterStats() groupcommit.Stats { return in.writer.Stats() }

// Handle records a batch of one queue's messages.
func (in *Inbox) Handle(ctx context.Context, batch []Message) error {
	msgs := make([]Decoded, len(batch))
	for i, m := range batch {
		msgs[i] = Decode(m)
		if msgs[i].Bad != "" {
			in.log.Warn("bad message: recorded and dead-lettered", "msg_id", m.MsgID, "queue", m.Queue, "offset", m.Offset, "reason", msgs[i].Bad)
		} else if m.ShardingKey != "" && m.ShardingKey != strconv.FormatInt(msgs[i].UserID, 10) {
			// Sent under another key it may sit on another queue than its user's other
			// events; the lanes keep the order all the same, so only note it.
			in.log.Warn("event carries a foreign sharding key", "msg_id", m.MsgID, "sharding_key", m.ShardingKey, "user_id", msgs[i].UserID)
		}
	}
	spans := in.arriveSpans(ctx, batch, msgs)
	req := writeReq{msgs: msgs, reply: make(chan error, 1)}
	in.writer.Submit(req, len(msgs))
	var err error
	select {
	case err = <-req.reply:
	case <-ctx.Done():
		// Not acknowledged: the batch comes again, and its rows, should they commit
		// meanwhile, are found there.
		err = ctx.Err()
	}
	endSpans(spans, err)
	return err
}

// writeGroup records the batches of group, from several queues, in one transaction and
// answers each. When the database refuses the data of one message, each batch is written
// again on its own, and the refusing batch one message at a time, the refused one as bad: a
// batch of one queue never fails because of another's message.
func (in *Inbox) writeGroup(ctx context.Context, group []writeReq) {
	var all []Decoded
	for _, g := range group {
		all = append(all, g.msgs...)
	}
	r, err := in.write(ctx, all)
	if err == nil {
		in.count(r)
	}
	if !isDataError(err) {
		for _, g := range group {
			g.reply <- err
		}
		return
	}
	for _, g := range group {
		if len(group) > 1 {
			if r, err = in.write(ctx, g.msgs); err == nil {
				in.count(r)
			}
		}
		if isDataError(err) {
			err = in.oneByOne(ctx, g.msgs)
		}
		g.reply <- err
	}
}

// tracer starts the inbox's spans.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/notify/inbox")

// arriveSpans starts, for each good message of batch that carried a traceparent, the span of
// its recording, a child of the sender's span, and gives the arrival its traceparent: the
// inbox row stores it, and the lane's send span is its child.
func (in *Inbox) arriveSpans(ctx context.Context, batch []Message, msgs []Decoded) []trace.Span {
	var spans []trace.Span
	for i, m := range batch {
		if m.Traceparent == "" || msgs[i].Bad != "" {
			continue
		}
		sctx, span := tracer.Start(telemetry.WithParent(ctx, m.Traceparent), "inbox.arrive", trace.WithSpanKind(trace.SpanKindConsumer))
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.system", "rocketmq"), attribute.String("messaging.message.id", m.MsgID),
				attribute.String("messaging.rocketmq.queue", m.Queue), attribute.Int64("messaging.rocketmq.offset", m.Offset),
				attribute.Int64("sms.user_id", msgs[i].UserID), attribute.Int64("sms.seq", msgs[i].Seq))
		}
		msgs[i].Traceparent = telemetry.Traceparent(sctx)
		spans = append(spans, span)
	}
	return spans
}

// endSpans ends spans, errors when err is not nil.
func endSpans(spans []trace.Span, err error) {
	for _, s := range spans {
		if err != nil {
			s.SetStatus(codes.Error, err.Error())
		}
		s.End()
	}
}

// write records msgs in one transaction, within writeTimeout: the good ones through the gate,
// the bad ones here.
func (in *Inbox) write(ctx context.Context, msgs []Decoded) (Received, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	in.writes.Add(1)
	var good []gate.Arrival
	var bad []Decoded
	for _, m := range msgs {
		if m.Bad != "" {
			bad = append(bad, m)
		} else {
			good = append(good, m.Arrival)
		}
	}
	var r Received
	// Workers for the users the write may claim; handed over (or freed) once it ends.
	ticket := in.lanes.Reserve(len(good))
	arrived, err := in.send(ctx, good, bad, ticket, &r)
	if err != nil {
		// Whatever the write claimed did not commit, or is not known to have: such a user
		// comes back to the lanes when its lease ends.
		ticket.Take(gate.Arrived{})
		return Received{}, err
	}
	ticket.Take(arrived)
	return r, nil
}

// send writes good through the gate and bad here, in one transaction of two round trips
// (pg.TwoTrips): BEGIN with the read of the users' positions, then the write, the bad
// messages' rows and COMMIT.
func (in *Inbox) send(ctx context.Context, good []gate.Arrival, bad []Decoded, ticket *gate.Ticket, r *Received) (gate.Arrived, error) {
	var w *gate.ArrivalWrite
	if len(good) > 0 {
		w = in.gate.NewArrival(good, ticket)
	}
	err := pg.TwoTrips(ctx, in.store.db, pg.Bounds{}, func(b *pgx.Batch) {
		if w != nil {
			w.QueueRead(b)
		}
	}, func(b *pgx.Batch) error {
		if w != nil {
			w.QueueWrite(b)
		}
		if len(bad) > 0 {
			queueBad(b, bad, false, &r.Bad)
		}
		return nil
	})
	if err != nil {
		return gate.Arrived{}, err
	}
	r.Duplicates = len(bad) - r.Bad
	if w == nil {
		return gate.Arrived{}, nil
	}
	a := w.Arrived()
	r.Inserted, r.Ignored, r.Baselines, r.Woken = a.Inserted, a.Ignored, a.Baselines, a.Woken
	r.Rewound, r.Superseded = a.Rewound, a.Superseded
	return a, nil
}

func (in *Inbox) oneByOne(ctx context.Context, msgs []Decoded) error {
	for _, m := range msgs {
		one := []Decoded{m}
		r, err := in.write(ctx, one)
		if isDataError(err) {
			in.log.Warn("bad message: the database refused it; recorded and dead-lettered", "msg_id", m.MsgID, "err", err)
			one[0].markBad("the database refused it: " + err.Error())
			// What the broker said of it may be what the database refused.
			one[0].MsgID, one[0].Queue = storable(m.MsgID), storable(m.Queue)
			r, err = in.write(ctx, one)
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
	in.rewound.Add(int64(r.Rewound))
	in.superseded.Add(int64(r.Superseded))
	if r.Rewound > 0 || r.Superseded > 0 {
		in.log.Warn("the wallet's history was rewound (a restore, a copy or a failover): what the gate held of it is set aside, never sent; see the audit trail (history_rewound)",
			"users_rewound", r.Rewound, "arrivals_set_aside", r.Superseded)
	}
	if r.Baselines > 0 {
		in.log.Warn("users first seen past seq 1, in a queue's first batch after the group's first start began it at its end (CONSUME_FROM=last), start there; see GET /v1/gate", "users", r.Baselines)
	}
	in.received(r)
}

// storable returns s as text the database takes: valid UTF-8 without NUL bytes.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// isDataError reports whether the database refused the data itself (SQLSTATE class 22: an
// invalid value), which retrying cannot fix.
func isDataError(err error) bool {
	return pgerrcode.IsDataException(pg.Code(err))
}
