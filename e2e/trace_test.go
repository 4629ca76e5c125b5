package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/telemetry/otlpsink"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestBothBinariesExportTheDepositsTrace: walletsvc and the notifier, pointed at an OTLP/HTTP
// receiver by the standard environment (OTEL_EXPORTER_OTLP_ENDPOINT), export real OTLP
// protobuf. A deposit made with a traceparent of the caller's is one trace across both: the
// wallet's server span is the caller's span's child, and the notifier's inbox and SMS send
// spans, and the SMS provider's request, are in the same trace.
func TestBothBinariesExportTheDepositsTrace(t *testing.T) {
	t.Parallel()
	sink, err := otlpsink.Start(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	sms := newProvider(t)
	s := newStack(t)
	otlp := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.Endpoint(), "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY": "100",
	}
	w := s.start("walletsvc", otlp)
	nenv := webhookEnv(sms, "1m")
	maps.Copy(nenv, otlp)
	n := s.start("notifier", nenv)
	a := api{t: t, base: func() string { return w.url }}
	u := a.createUser("traced", okPhone(5))

	const (
		traceID    = "0af7651916cd43dd8448eb211c80319c"
		callerSpan = "b7ad6b7169203331"
	)
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/users/%d/deposits?wait=true", w.url, u), strings.NewReader(`{"amount":700}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+devServiceToken)
	req.Header.Set("Traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	byService := func() map[string]map[string]otlpsink.Span {
		out := map[string]map[string]otlpsink.Span{}
		for _, sp := range sink.Trace(traceID) {
			if out[sp.Service] == nil {
				out[sp.Service] = map[string]otlpsink.Span{}
			}
			out[sp.Service][sp.Name] = sp
		}
		return out
	}
	// The SMS can reach the provider before walletsvc's batch exporter sends the request's
	// spans: wait for both services' ends of the trace.
	wait.Until(t, 60*time.Second, "the notifier's SMS send span and walletsvc's request span", func() bool {
		got := byService()
		_, sent := got["notifier"]["sms.send"]
		_, served := got["walletsvc"]["POST /v1/users/:id/deposits"]
		_, published := got["walletsvc"]["outbox.send"]
		return sent && served && published
	})
	got := byService()
	server := got["walletsvc"]["POST /v1/users/:id/deposits"]
	require.Equal(t, callerSpan, server.ParentID, "the server span continues the caller's trace")
	require.Equal(t, "server", server.Kind)
	for _, name := range []string{"saga.start", "saga.run", "saga.call", "saga.commit", "outbox.send"} {
		require.Contains(t, got["walletsvc"], name, "walletsvc's spans of the trace: %v", got["walletsvc"])
	}
	for _, name := range []string{"inbox.arrive", "sms.send"} {
		require.Contains(t, got["notifier"], name, "the notifier's spans of the trace: %v", got["notifier"])
	}
	require.Equal(t, got["walletsvc"]["outbox.send"].SpanID, got["notifier"]["inbox.arrive"].ParentID,
		"the message carried the relay's send span to the notifier")
	require.Equal(t, got["notifier"]["inbox.arrive"].SpanID, got["notifier"]["sms.send"].ParentID)

	calls := sms.Calls(func(c smsprovider.Call) bool { return c.UserID == u })
	require.Len(t, calls, 1)
	require.True(t, strings.HasPrefix(calls[0].Traceparent, "00-"+traceID+"-"), "the SMS request carries the trace: %q", calls[0].Traceparent)

	// At shutdown each binary flushes what it holds, and exits cleanly.
	n.stop(t)
	w.stop(t)
}
