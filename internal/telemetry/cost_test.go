package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// BenchmarkDepositSpans measures the CPU cost of the spans walletsvc makes for one deposit
// (the saga's start, run, remote call and two commits, each commit's traceparent, the
// relay's send span and its traceparent), with tracing off (the API's no-op provider, what an
// unconfigured binary runs) and on (the SDK with a batching exporter that drops what it is
// given). It leaves out the database and the network, which tracing does not add to.
func BenchmarkDepositSpans(b *testing.B) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	for _, c := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"off", noop.NewTracerProvider()}, {"on", sdk}} {
		b.Run(c.name, func(b *testing.B) {
			tr := c.tp.Tracer("bench")
			attrs := func(span trace.Span, kv ...attribute.KeyValue) {
				if span.IsRecording() {
					span.SetAttributes(kv...)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				ctx := context.Background()
				sctx, start := tr.Start(ctx, "saga.start")
				attrs(start, attribute.Int64("saga.id", 1), attribute.String("saga.kind", "deposit"))
				_ = telemetry.Traceparent(sctx)
				cctx, commit := tr.Start(sctx, "saga.commit")
				_ = telemetry.Traceparent(cctx)
				commit.End()
				start.End()
				rctx, run := tr.Start(trace.ContextWithSpanContext(ctx, start.SpanContext()), "saga.run")
				attrs(run, attribute.Int64("saga.id", 1), attribute.String("saga.kind", "deposit"))
				_, call := tr.Start(rctx, "saga.call", trace.WithSpanKind(trace.SpanKindClient))
				attrs(call, attribute.String("saga.step", "charge"), attribute.String("saga.outcome", "done"))
				call.End()
				cctx, commit = tr.Start(rctx, "saga.commit")
				tp := telemetry.Traceparent(cctx)
				attrs(commit, attribute.String("saga.state", "completed"), attribute.Int("saga.local_steps", 1))
				commit.End()
				run.End()
				_, send := tr.Start(telemetry.WithParent(ctx, tp), "outbox.send", trace.WithSpanKind(trace.SpanKindProducer))
				attrs(send, attribute.Int64("outbox.id", 1), attribute.Int64("outbox.seq", 1))
				_ = telemetry.Format(send.SpanContext())
				send.End()
			}
		})
	}
}
