package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/telemetry"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestEnabled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"sdk disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, telemetry.Enabled(env(c.env)))
		})
	}
}

func TestSetupOffChangesNothing(t *testing.T) {
	t.Parallel()
	shutdown, err := telemetry.Setup(context.Background(), "test", env(nil))
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	_, span := telemetry.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	require.False(t, span.SpanContext().IsValid(), "with tracing off, spans are the no-op API's")
}

func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := telemetry.Parse(tp)
	require.True(t, sc.IsValid())
	require.True(t, sc.IsRemote())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.Equal(t, tp, telemetry.Format(sc))
	require.Equal(t, tp, telemetry.Traceparent(telemetry.WithParent(context.Background(), tp)))

	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		require.False(t, telemetry.Parse(bad).IsValid(), bad)
		require.Empty(t, telemetry.Traceparent(telemetry.WithParent(context.Background(), bad)), bad)
	}
	require.Empty(t, telemetry.Traceparent(context.Background()))
}

func TestLogHandlerAddsSpanIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := telemetry.LogHandler(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	log := slog.New(h).With("component", "x")
	ctx := telemetry.WithParent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

	log.InfoContext(ctx, "with span")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", rec["trace_id"])
	require.Equal(t, "00f067aa0ba902b7", rec["span_id"])
	require.Equal(t, "x", rec["component"])
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte(`"trace_id"`)), "wrapping twice adds the ids once")

	buf.Reset()
	log.InfoContext(context.Background(), "without")
	require.NotContains(t, buf.String(), "trace_id")
	require.False(t, trace.SpanContextFromContext(context.Background()).IsValid())
}
