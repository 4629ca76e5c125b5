package otlpsink_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/telemetry/otlpsink"
)

// TestTheSDKsExportArrivesAsATree: the SDK's own OTLP/HTTP exporter (protobuf, gzipped)
// sends a small trace to a sink, which decodes every span with its service, parent, kind,
// attributes, status and links, and prints the tree.
func TestTheSDKsExportArrivesAsATree(t *testing.T) {
	t.Parallel()
	sink, err := otlpsink.Start(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.Endpoint()+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "svc"))))
	tr := tp.Tracer("test")

	rctx, root := tr.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer))
	cctx, child := tr.Start(rctx, "child", trace.WithAttributes(attribute.Int("n", 7)))
	_, leaf := tr.Start(cctx, "leaf", trace.WithSpanKind(trace.SpanKindClient))
	leaf.SetStatus(codes.Error, "boom")
	leaf.End()
	child.End()
	_, linked := tr.Start(ctx, "linked", trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: root.SpanContext()}))
	linked.End()
	root.End()
	require.NoError(t, tp.Shutdown(ctx))

	id := root.SpanContext().TraceID().String()
	spans := sink.Trace(id)
	require.Len(t, spans, 3)
	byName := map[string]otlpsink.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		require.Equal(t, "svc", s.Service)
	}
	require.Empty(t, byName["root"].ParentID)
	require.Equal(t, "server", byName["root"].Kind)
	require.Equal(t, byName["root"].SpanID, byName["child"].ParentID)
	require.Equal(t, "7", byName["child"].Attrs["n"])
	require.Equal(t, byName["child"].SpanID, byName["leaf"].ParentID)
	require.True(t, byName["leaf"].Error)
	require.Len(t, sink.Spans(), 4)
	for _, s := range sink.Spans() {
		if s.Name == "linked" {
			require.Equal(t, []string{id + "-" + root.SpanContext().SpanID().String()}, s.Links)
		}
	}

	var out strings.Builder
	require.NoError(t, otlpsink.Tree(&out, spans, "n"))
	d := `[0-9.]+[µnm]?s`
	require.Regexp(t, regexp.MustCompile(`^root \[svc\] `+d+`\n  child \[svc\] `+d+` n=7\n    leaf \[svc\] `+d+` \(error\)\n$`), out.String())
}
