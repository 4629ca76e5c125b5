package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walletsaga/walletsaga/internal/provider"
)

// A call's client span goes to whatever collector OTEL_* names: it shows the URL called with
// its key masked and without its userinfo, while the provider still gets the URL as
// configured.
func TestAdapterSpansShowTheURLWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	queries := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(provider.Charge{ChargeID: "ch_1", Status: provider.ChargeCharged})
	}))
	t.Cleanup(srv.Close)
	base := "http://acct:s3cret-pw@" + srv.Listener.Addr().String() + "/base?api_key=s3cret-key&region=eu"
	gw, err := provider.NewGateway(provider.Options{URL: base, Token: stubToken})
	require.NoError(t, err)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ctx, step := tp.Tracer("test").Start(context.Background(), "saga step")
	_, err = gw.Charge(ctx, "1:charge", 7, 500, "CNY", "card")
	step.End()
	require.NoError(t, err)
	require.Equal(t, "api_key=s3cret-key&region=eu", <-queries, "the provider gets its key")

	var full []string
	for _, s := range spans.GetSpans() {
		require.NotContains(t, fmt.Sprintf("%+v", s), "s3cret", "span %q", s.Name)
		for _, a := range s.Attributes {
			if s.SpanKind == trace.SpanKindClient && a.Key == "url.full" {
				full = append(full, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{srv.URL + "/base" + provider.PathCharges + "?api_key=xxxxx&region=eu"}, full)
}
