package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/telemetry/otlpsink"
)

func TestExporter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string // "" for none; "error" for a refusal
	}{
		{"unset is otlp over http", nil, telemetry.ExporterOTLPHTTP},
		{"otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, telemetry.ExporterOTLPHTTP},
		{"otlp, spaced and upper case", map[string]string{"OTEL_TRACES_EXPORTER": " OTLP "}, telemetry.ExporterOTLPHTTP},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, telemetry.ExporterOTLPHTTP},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, telemetry.ExporterOTLPGRPC},
		{"the traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, telemetry.ExporterOTLPHTTP},
		{"the traces protocol alone", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, telemetry.ExporterOTLPGRPC},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, telemetry.ExporterConsole},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, ""},
		{"an exporter not built in", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "error"},
		{"a list", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, "error"},
		{"http/json", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "error"},
		{"a traces protocol not known", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := telemetry.Exporter(env(c.env))
			if c.want == "error" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestSetupRefusesWhatItCannotExport: a binary asked for an exporter or a protocol it does
// not have fails at start, naming the variable, and installs nothing.
func TestSetupRefusesWhatItCannotExport(t *testing.T) {
	t.Parallel()
	_, err := telemetry.Setup(context.Background(), "test", env(map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}))
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER")
	_, err = telemetry.Setup(context.Background(), "test", env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}))
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL")
	_, span := telemetry.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	require.False(t, span.SpanContext().IsValid(), "a refused set-up installs no provider")
}

// exported is what a test collector received: the spans, and the headers of the requests.
type exported struct {
	mu      sync.Mutex
	spans   []otlpsink.Span
	headers []map[string][]string
}

func (e *exported) add(req *collectortrace.ExportTraceServiceRequest, h map[string][]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, otlpsink.Decode(req)...)
	e.headers = append(e.headers, h)
}

// traceService is an OTLP/gRPC trace collector.
type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	got *exported
}

func (s traceService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.got.add(req, md)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestTheOTLPExportersTakeTheStandardEnvironment exports one span over each OTLP protocol
// to a collector of the test's own, configured only by the OTEL_* variables a deployment
// sets: the endpoint (the general one, or the traces one, which wins), headers (the
// general ones, and the traces ones, which win), the protocol, the service name and the
// resource attributes, and the sampler.
//
// It sets environment variables, so it does not run in parallel.
func TestTheOTLPExportersTakeTheStandardEnvironment(t *testing.T) {
	// OTLP over HTTP.
	var viaHTTP exported
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/custom/traces" {
			http.NotFound(w, r)
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		viaHTTP.add(&req, r.Header)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // overridden by the traces endpoint
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/custom/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer general,x-tenant=acme")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer traces")
	t.Setenv("OTEL_SERVICE_NAME", "walletsvc-eu1")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	exportOne(t, "span over http")
	require.Len(t, viaHTTP.spans, 1)
	require.Equal(t, "span over http", viaHTTP.spans[0].Name)
	require.Equal(t, "walletsvc-eu1", viaHTTP.spans[0].Service)
	require.Equal(t, []string{"Bearer traces"}, http.Header(viaHTTP.headers[0]).Values("Authorization"), "the traces headers win")

	// OTLP over gRPC.
	var viaGRPC exported
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, traceService{got: &viaGRPC})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	exportOne(t, "span over grpc")
	require.Len(t, viaGRPC.spans, 1)
	require.Equal(t, "span over grpc", viaGRPC.spans[0].Name)
	require.Equal(t, []string{"Bearer general"}, viaGRPC.headers[0]["authorization"])
	require.Equal(t, []string{"acme"}, viaGRPC.headers[0]["x-tenant"])

	// A sampler that samples nothing exports nothing.
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	exportOne(t, "not sampled")
	require.Len(t, viaGRPC.spans, 1)
}

// exportOne ends one span of a provider built from the process's environment, and flushes.
func exportOne(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tp, err := telemetry.NewTracerProvider(ctx, "test", os.Getenv)
	require.NoError(t, err)
	_, span := tp.Tracer("test").Start(ctx, name)
	span.End()
	require.NoError(t, tp.Shutdown(ctx))
}
