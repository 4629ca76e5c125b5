package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/openapicheck"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

// TestOpenAPIDocumentsEveryRoute builds the server exactly as serve does and compares its
// registered routes with the embedded OpenAPI document, both ways. Nothing is exempt: the
// probes, /metrics, /openapi.yaml, the page and its assets are documented too.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	gate := ordering.NewGate(pool, ordering.GateConfig{Logger: log})
	e := newServer(config{}, log, pool, gate, nil, notify.NewLogSender(nil), metrics.NewRegistry())

	undocumented, missing, err := openapicheck.Diff(httpapi.OpenAPI, e.Routes())
	require.NoError(t, err)
	require.Empty(t, undocumented, "routes served but not in internal/notify/httpapi/openapi.yaml")
	require.Empty(t, missing, "operations in internal/notify/httpapi/openapi.yaml that are not served")
	require.Len(t, openapicheck.Routes(e.Routes()), 15)

	ts := httptest.NewServer(e)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, httpapi.OpenAPI, b)
}
