package deadletters_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// tracingSender records the traceparent of the context each send was given.
type tracingSender struct{ traceparents []string }

func (s *tracingSender) Send(ctx context.Context, _ notify.SMS) error {
	s.traceparents = append(s.traceparents, telemetry.Traceparent(ctx))
	return nil
}

// globalTracing sets the process's global tracer provider once, recording into memory. Once:
// the package's tracer, taken from the global provider before any was set, follows the first
// provider set and no later one, so a provider set again for a second run (go test -count)
// would see none of its spans.
var globalTracing = sync.OnceValues(func() (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	otel.SetTracerProvider(tp)
	return tp, spans
})

// TestReplayAndReconcileAreTraced: an operator's replay is a span (dlq.replay) under the
// operator's request, linked to the span that recorded the SMS's arrival, and the provider's
// send is its child; a message the reconciler reads from the DLQ topic is a span
// (dlq.reconcile) under the span the message carries, or a root.
//
// It uses the process's global tracer provider, so it does not run in parallel: it runs
// before the parallel tests of the package start, and reads only the spans of its own run.
func TestReplayAndReconcileAreTraced(t *testing.T) {
	tp, spans := globalTracing()
	spans.Reset()
	byName := func(name string) []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range spans.GetSpans() {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}

	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	ctx := context.Background()
	const arrival = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, err := pool.Exec(ctx, `UPDATE notify.notifications SET traceparent = $1 WHERE user_id = 1 AND seq = 2`, arrival)
	require.NoError(t, err)

	// The replay.
	reqCtx, req := tp.Tracer("test").Start(ctx, "POST /v1/dead-letters/1/2/replay")
	sender := &tracingSender{}
	res, err := operator(pool, sender).Replay(reqCtx, "admin", 1, 2, "provider was down")
	require.NoError(t, err)
	req.End()
	replays := byName("dlq.replay")
	require.Len(t, replays, 1)
	replay := replays[0]
	require.Equal(t, req.SpanContext().SpanID(), replay.Parent.SpanID(), "a child of the operator's request")
	require.Equal(t, req.SpanContext().TraceID(), replay.SpanContext.TraceID())
	require.Len(t, replay.Links, 1)
	require.Equal(t, arrival, telemetry.Format(replay.Links[0].SpanContext), "linked to the SMS's arrival")
	require.Equal(t, []string{telemetry.Format(replay.SpanContext)}, sender.traceparents, "the provider's send is its child")
	require.Contains(t, replay.Attributes, attribute.Int64("sms.user_id", 1))
	require.Contains(t, replay.Attributes, attribute.Int64("sms.seq", 2))
	require.Contains(t, replay.Attributes, attribute.Int("dlq.replay", res.Replay))
	require.Equal(t, codes.Unset, replay.Status.Code)

	// A replay that fails says so.
	_, err = operator(pool, failingSender{errors.New("provider down")}).Replay(ctx, "admin", 1, 2, "again")
	require.Error(t, err)
	replays = byName("dlq.replay")
	require.Len(t, replays, 2)
	require.Equal(t, codes.Error, replays[1].Status.Code)
	require.False(t, replays[1].Parent.IsValid(), "a root without a request span")

	// The reconciler: a wallet event the broker dead-lettered carries the relay's traceparent.
	const relaySend = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	rec := deadletters.NewReconciler(gate.NewStore(pool), inbox.NewStore(pool), quiet)
	b, err := walletevent.Encode(notifytest.Event(3, 1, walletevent.Deposit, 100))
	require.NoError(t, err)
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "orig-3-1", Body: b, Traceparent: relaySend}))
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "bad-9", Body: []byte("garbage")}))
	found := byName("dlq.reconcile")
	require.Len(t, found, 2)
	require.Equal(t, trace.SpanKindConsumer, found[0].SpanKind)
	require.Equal(t, relaySend, telemetry.Format(found[0].Parent), "a child of the span the message carries")
	require.Equal(t, found[0].Parent.TraceID(), found[0].SpanContext.TraceID())
	require.Contains(t, found[0].Attributes, attribute.Bool("dlq.foreign", true))
	require.Contains(t, found[0].Attributes, attribute.Int64("sms.seq", 1))
	require.Contains(t, found[0].Attributes, attribute.String("messaging.message.id", "orig-3-1"))
	require.False(t, found[1].Parent.IsValid(), "a message without a traceparent is a root")
	require.Contains(t, found[1].Attributes, attribute.Bool("dlq.bad", true))
}
