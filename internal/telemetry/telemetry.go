// Package telemetry sets up OpenTelemetry tracing for a binary and carries trace context
// where a context cannot go: into a database row or a broker message, as a W3C traceparent
// string, and back out of it. It also tags log records with the active span's ids, and gives
// the HTTP clients a transport whose spans show no secret of the URL (HTTPTransport).
//
// Tracing is off unless the standard OTEL_* environment asks for it (see Enabled); off, the
// global tracer provider stays the API's no-op one, so every span the project starts costs a
// few nanoseconds and nothing is stored (the traceparent columns stay NULL).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces: OTEL_SDK_DISABLED is not "true",
// and either OTEL_TRACES_EXPORTER names an exporter other than "none" or an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the exporter is
// then OTLP, over HTTP unless OTEL_EXPORTER_OTLP_PROTOCOL says grpc).
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case strings.EqualFold(exp, "none"):
		return false
	case exp != "":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// The span exporters Exporter names.
const (
	ExporterOTLPHTTP = "otlp-http" // OTLP, protobuf over HTTP (otlptracehttp)
	ExporterOTLPGRPC = "otlp-grpc" // OTLP over gRPC (otlptracegrpc)
	ExporterConsole  = "console"   // spans as JSON on stdout (stdouttrace)
)

// Exporter says which span exporter the environment asks for, as the OpenTelemetry
// specification's environment variables say it: OTEL_TRACES_EXPORTER is "otlp" (the default
// when unset), "console" (spans as JSON on stdout) or "none" (""); for "otlp", the protocol
// is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf"
// (the default) or "grpc". It answers ExporterOTLPHTTP, ExporterOTLPGRPC, ExporterConsole or
// "" (none), and an error for any other value, as contrib's autoexport, which chose the
// exporter before, did.
func Exporter(getenv func(string) string) (string, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	switch name {
	case "none":
		return "", nil
	case "console":
		return ExporterConsole, nil
	case "", "otlp":
	default:
		return "", fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: want otlp, console or none", name)
	}
	key := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	proto := strings.TrimSpace(getenv(key))
	if proto == "" {
		key = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = strings.TrimSpace(getenv(key))
	}
	switch proto {
	case "", "http/protobuf":
		return ExporterOTLPHTTP, nil
	case "grpc":
		return ExporterOTLPGRPC, nil
	}
	return "", fmt.Errorf("telemetry: %s=%q: want http/protobuf or grpc", key, proto)
}

// newExporter builds the exporter Exporter names. The OTLP exporters read the rest of their
// configuration from the OTEL_EXPORTER_OTLP_* environment themselves (endpoint, headers,
// timeout, compression, certificates, insecure; each with its _TRACES_ form).
func newExporter(ctx context.Context, name string) (sdktrace.SpanExporter, error) {
	switch name {
	case ExporterOTLPHTTP:
		return otlptracehttp.New(ctx)
	case ExporterOTLPGRPC:
		return otlptracegrpc.New(ctx)
	case ExporterConsole:
		return stdouttrace.New()
	}
	return nil, fmt.Errorf("telemetry: no exporter %q", name)
}

// Setup installs the global tracer provider (NewTracerProvider) and the W3C trace-context
// propagator for the binary named service, when Enabled(getenv). The returned shutdown
// flushes the spans not exported yet; it is a no-op when tracing is off, and Setup then
// changes nothing.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	if !Enabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	tp, err := NewTracerProvider(ctx, service, getenv)
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return tp.Shutdown, nil
}

// NewTracerProvider returns a tracer provider that batches spans to the exporter
// Exporter(getenv) names. The sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG), the
// batching (OTEL_BSP_*), the resource (OTEL_RESOURCE_ATTRIBUTES; OTEL_SERVICE_NAME overrides
// service) and the OTLP exporters' settings come from the process's environment, read by the
// SDK itself.
func NewTracerProvider(ctx context.Context, service string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	name, err := Exporter(getenv)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, errors.New("telemetry: OTEL_TRACES_EXPORTER=none: no exporter")
	}
	exp, err := newExporter(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("telemetry: span exporter: %w", err)
	}
	// Later detectors win: the environment's service name over the binary's.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Propagator is the propagator the binaries install: W3C trace context and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Tracer returns the global provider's tracer for an instrumentation scope (a package path).
func Tracer(scope string) trace.Tracer { return otel.Tracer(scope) }

// Traceparent returns the W3C traceparent of the span ctx carries ("00-<trace id>-<span
// id>-<flags>"), or "" when it carries none (tracing off, or no span started).
func Traceparent(ctx context.Context) string {
	return Format(trace.SpanContextFromContext(ctx))
}

// Format returns sc as a W3C traceparent, or "" when sc is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Parse returns the span context a W3C traceparent names, as a remote one; the zero
// SpanContext (not valid) for "" or anything malformed.
func Parse(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// WithParent returns ctx carrying the remote span context traceparent names, so that the
// next span started from it is its child; ctx as it is when traceparent is "" or malformed.
func WithParent(ctx context.Context, traceparent string) context.Context {
	sc := Parse(traceparent)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Link returns a span start option linking the new span to the span traceparent names
// (nothing when it is "" or malformed): a run that resumes earlier work in a trace of its own.
func Link(traceparent string) trace.SpanStartOption {
	sc := Parse(traceparent)
	if !sc.IsValid() {
		return trace.WithLinks()
	}
	return trace.WithLinks(trace.Link{SpanContext: sc})
}

// AddLink links span to the span traceparent names (nothing when it is "" or malformed), for
// a link known only once the span has started.
func AddLink(span trace.Span, traceparent string) {
	if sc := Parse(traceparent); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// flushTimeout bounds the export of the last spans at shutdown.
const flushTimeout = 5 * time.Second

// Flush calls a shutdown that Setup returned, on a context of its own (the program's has
// ended by then), and logs a failure: spans that could not be exported are lost, nothing
// else is.
func Flush(shutdown func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.Warn("telemetry: exporting the last spans failed", "err", err)
	}
}
