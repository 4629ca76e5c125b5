// Package otlpsink is a small OTLP/HTTP trace receiver that keeps what it is sent in
// memory: the demo points both binaries at one (OTEL_EXPORTER_OTLP_ENDPOINT) and prints a
// deposit's trace as a tree (GET /trees/{trace id}), and the end-to-end tests use one to check the traces the
// binaries really export. It takes the protobuf encoding (the SDK's default for
// http/protobuf), gzipped or not; it is no collector: nothing is forwarded or kept on disk.
package otlpsink

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request.
const maxBody = 16 << 20

// maxSpans bounds what a sink keeps: past it, the oldest half is dropped (a sink in a
// long-running stack, the compose file's traces, keeps the recent traces only).
const maxSpans = 200_000

// Span is one span as received.
type Span struct {
	Service  string // the resource's service.name
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; "" for a root
	Name     string
	Kind     string // "server", "client", "producer", "consumer" or "internal"
	Start    time.Time
	End      time.Time
	Attrs    map[string]string
	// Links are the spans this one links to, as "<trace id>-<span id>".
	Links []string
	Error bool // the span's status is an error
}

// Sink receives OTLP/HTTP trace exports. It is safe for concurrent use.
type Sink struct {
	srv *http.Server
	ln  net.Listener

	mu    sync.Mutex
	spans []Span
}

// Start serves a sink on addr ("127.0.0.1:0" for any free loopback port) until Close.
func Start(ctx context.Context, addr string) (*Sink, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlpsink: %w", err)
	}
	s := &Sink{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.traces)
	mux.HandleFunc("GET /trees/{trace}", s.tree)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is the base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces).
func (s *Sink) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Close stops serving.
func (s *Sink) Close() error { return s.srv.Close() }

func (s *Sink) traces(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer func() { _ = zr.Close() }()
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "only application/x-protobuf is taken, not "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	got := Decode(&req)
	s.mu.Lock()
	s.spans = append(s.spans, got...)
	if len(s.spans) > maxSpans {
		s.spans = slices.Delete(s.spans, 0, len(s.spans)-maxSpans/2)
	}
	s.mu.Unlock()
	out, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TreeAttrs are the span attributes a tree served by the sink shows.
var TreeAttrs = []string{"saga.id", "saga.step", "saga.outcome", "saga.state", "messaging.rocketmq.queue", "outbox.seq", "sms.seq",
	"http.status_code", "http.response.status_code"}

// tree answers GET /trees/{trace}: the trace's spans received so far, as Tree prints them
// (404 while none has arrived).
func (s *Sink) tree(w http.ResponseWriter, r *http.Request) {
	spans := s.Trace(r.PathValue("trace"))
	if len(spans) == 0 {
		http.Error(w, "no span of that trace has arrived", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = Tree(w, spans, TreeAttrs...)
}

// Decode turns an export request into spans.
func Decode(req *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					Service: service, TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(),
					Kind:  strings.ToLower(strings.TrimPrefix(sp.GetKind().String(), "SPAN_KIND_")),
					Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())), //nolint:gosec // G115: nanoseconds since 1970 fit an int64 until 2262
					Attrs: attrs(sp.GetAttributes()),
					Error: sp.GetStatus().GetCode().String() == "STATUS_CODE_ERROR",
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetDoubleValue())
		}
	}
	return m
}

// Spans returns every span received so far, in the order received.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans)
}

// Trace returns the spans received of one trace (hex id), by start time.
func (s *Sink) Trace(traceID string) []Span {
	var out []Span
	for _, sp := range s.Spans() {
		if sp.TraceID == traceID {
			out = append(out, sp)
		}
	}
	slices.SortStableFunc(out, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return out
}

// Tree writes a trace's spans as an indented tree: each span under its parent, by start
// time, with its service, its duration and the attributes named in show that it has. A span
// whose parent was not received is shown at the top.
func Tree(w io.Writer, spans []Span, show ...string) error {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	children := map[string][]Span{}
	for _, s := range spans {
		p := s.ParentID
		if !ids[p] {
			p = ""
		}
		children[p] = append(children[p], s)
	}
	var walk func(parent string, depth int) error
	walk = func(parent string, depth int) error {
		kids := children[parent]
		slices.SortStableFunc(kids, func(a, b Span) int { return a.Start.Compare(b.Start) })
		for _, s := range kids {
			line := fmt.Sprintf("%s%s [%s] %s", strings.Repeat("  ", depth), s.Name, s.Service, s.End.Sub(s.Start).Round(10*time.Microsecond))
			for _, k := range show {
				if v, ok := s.Attrs[k]; ok {
					line += " " + k + "=" + v
				}
			}
			if s.Error {
				line += " (error)"
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
			if err := walk(s.SpanID, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("", 0)
}
