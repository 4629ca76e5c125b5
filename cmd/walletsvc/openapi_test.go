package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/openapicheck"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

// TestOpenAPIDocumentsEveryRoute builds the server exactly as serve does and compares its
// registered routes with the embedded OpenAPI document, both ways. Nothing is exempt: the
// probes, /metrics and /openapi.yaml are documented too.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := wallet.NewService(pool, saga.New(pool, saga.Options{Logger: log}),
		wallet.NewSimGateway(pool, wallet.SimOptions{}), wallet.NewSimMerchant(pool, wallet.SimOptions{}), wallet.Options{Logger: log})
	require.NoError(t, err)
	cfg := config{ServiceToken: DevServiceToken}
	e := newServer(cfg, log, svc, metrics.NewRegistry())

	undocumented, missing, err := openapicheck.Diff(httpapi.OpenAPI, e.Routes())
	require.NoError(t, err)
	require.Empty(t, undocumented, "routes served but not in internal/wallet/httpapi/openapi.yaml")
	require.Empty(t, missing, "operations in internal/wallet/httpapi/openapi.yaml that are not served")
	require.Len(t, openapicheck.Routes(e.Routes()), 15)

	ts := httptest.NewServer(e)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the document is open")
	require.Equal(t, httpapi.OpenAPI, b)
}
