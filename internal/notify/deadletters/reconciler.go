package deadletters

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// Reconciler is the DLQ watcher's handler: everything found in the DLQ topic is recorded in
// Postgres — a wallet event as a dead-lettered (user, seq) unless the inbox has it already,
// anything else as a bad message — so a dead letter that reached the topic by another path
// (a crash, an older version, the client's own) cannot leave its user waiting or go unseen.
type Reconciler struct {
	gate *gate.Store
	bad  *inbox.Store
	log  *slog.Logger
	woke func()
}

// NewReconciler returns the reconciler, recording dead-lettered SMS through g and bad
// messages in bad; woke is called when it recorded a dead letter (to wake the lanes, which
// move past it).
func NewReconciler(g *gate.Store, bad *inbox.Store, woke func(), log *slog.Logger) *Reconciler {
	if log == nil {
		log = slog.Default()
	}
	if woke == nil {
		woke = func() {}
	}
	return &Reconciler{gate: g, bad: bad, woke: woke, log: log.With("component", "dlq-reconciler")}
}

// Handle records one message found in the DLQ topic, in a span (dlq.reconcile) that is a
// child of the span the message carries (the relay's send, when the broker dead-lettered it),
// or a root.
func (r *Reconciler) Handle(ctx context.Context, m inbox.Message) (err error) {
	ctx, span := tracer.Start(telemetry.WithParent(ctx, m.Traceparent), "dlq.reconcile", trace.WithSpanKind(trace.SpanKindConsumer))
	var recorded bool
	d := inbox.Decode(m)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.system", "rocketmq"), attribute.String("messaging.destination.name", m.Topic),
				attribute.String("messaging.message.id", m.MsgID), attribute.Bool("dlq.bad", d.Bad != ""), attribute.Bool("dlq.recorded", recorded))
			if d.Bad == "" {
				span.SetAttributes(attribute.Int64("sms.user_id", d.UserID), attribute.Int64("sms.seq", d.Seq))
			}
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if d.Bad != "" {
		return r.bad.RecordFoundBad(ctx, d)
	}
	reason := "found in " + m.Topic + " without a record"
	if m.DeadLetterReason != "" {
		reason += ": " + m.DeadLetterReason
	}
	recorded, err = r.gate.FoundDeadLetter(ctx, d.Arrival, reason)
	if err != nil {
		return err
	}
	if recorded {
		r.log.WarnContext(ctx, "recorded a dead letter found in the DLQ that had no record", "user_id", d.UserID, "seq", d.Seq, "msg_id", m.MsgID)
		r.woke()
	}
	return nil
}

// tracer starts the reconciler's and the operators' spans.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/notify/deadletters")
