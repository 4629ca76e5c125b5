package senders_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/notify/senders"
)

// An SMS's client span goes to whatever collector OTEL_* names: it shows SMS_WEBHOOK_URL
// with its key masked and without its userinfo, while the provider still gets the URL as
// configured.
func TestWebhookSpansShowTheURLWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	queries := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	client := senders.NewWebhookClient(1)
	t.Cleanup(client.CloseIdleConnections)
	hook := "http://acct:s3cret-pw@" + srv.Listener.Addr().String() + "/sms?api_key=s3cret-key&region=eu"
	s, err := senders.NewWebhookSender(hook, time.Second, client)
	require.NoError(t, err)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, lane := tp.Tracer("test").Start(context.Background(), "lane send")
	err = s.Send(ctx, sms(1, 1, "+8613800001234", 100))
	lane.End()
	require.NoError(t, err)
	require.Equal(t, "api_key=s3cret-key&region=eu", <-queries, "the provider gets its key")

	var full []string
	for _, sp := range spans.GetSpans() {
		require.NotContains(t, fmt.Sprintf("%+v", sp), "s3cret", "span %q", sp.Name)
		for _, a := range sp.Attributes {
			if sp.SpanKind == trace.SpanKindClient && a.Key == "url.full" {
				full = append(full, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{srv.URL + "/sms?api_key=xxxxx&region=eu"}, full)
}
