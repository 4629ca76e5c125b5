package deadletters

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// Reconciler is the DLQ watcher's handler: everything found in the DLQ topic that the gate
// does not know is recorded in Postgres as a bad message, flagged, and counted. The DLQ is
// not an input: a wallet event found there that this deployment never dead-lettered (the
// client never dead-letters on its own: MaxReconsumeTimes is unlimited) moves nobody past
// anything, so that whoever can publish to the DLQ topic cannot suppress a user's SMS; the
// user's gap, if it has one, is an operator's to skip.
type Reconciler struct {
	gate *gate.Store
	bad  *inbox.Store
	log  *slog.Logger
	// foreign counts the wallet events found in the DLQ that the gate did not know.
	foreign atomic.Int64
}

// NewReconciler returns the reconciler, asking g whether it knows a dead letter and recording
// bad and foreign messages in bad.
func NewReconciler(g *gate.Store, bad *inbox.Store, log *slog.Logger) *Reconciler {
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{gate: g, bad: bad, log: log.With("component", "dlq-reconciler")}
}

// Foreign counts the wallet events found in the DLQ topic that this deployment never
// dead-lettered (flagged as bad messages).
func (r *Reconciler) Foreign() int64 { return r.foreign.Load() }

// Handle looks at one message found in the DLQ topic (recording a bad or foreign one), in a span (dlq.reconcile) that is a
// child of the span the message carries (the relay's send, when the broker dead-lettered it),
// or a root.
func (r *Reconciler) Handle(ctx context.Context, m inbox.Message) (err error) {
	ctx, span := tracer.Start(telemetry.WithParent(ctx, m.Traceparent), "dlq.reconcile", trace.WithSpanKind(trace.SpanKindConsumer))
	var foreign bool
	d := inbox.Decode(m)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("messaging.system", "rocketmq"), attribute.String("messaging.destination.name", m.Topic),
				attribute.String("messaging.message.id", m.MsgID), attribute.Bool("dlq.bad", d.Bad != ""), attribute.Bool("dlq.foreign", foreign))
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
	known, err := r.gate.KnowsDeadLetter(ctx, d.Arrival)
	if err != nil || known {
		return err
	}
	foreign = true
	reason := "found in " + m.Topic + " but never dead-lettered here: not taken as a dead letter (an operator may skip the seq if it is lost)"
	if m.DeadLetterReason != "" {
		reason += "; the DLQ says: " + m.DeadLetterReason
	}
	if err := r.bad.RecordForeignDeadLetter(ctx, d, reason); err != nil {
		return err
	}
	r.foreign.Add(1)
	r.log.WarnContext(ctx, "a wallet event in the DLQ that this deployment never dead-lettered: flagged as a bad message, not recorded as a dead letter",
		"user_id", d.UserID, "seq", d.Seq, "msg_id", m.MsgID)
	return nil
}

// tracer starts the reconciler's and the operators' spans.
var tracer = telemetry.Tracer("github.com/walletsaga/walletsaga/internal/notify/deadletters")
