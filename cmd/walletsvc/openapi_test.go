package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestOpenAPIDocumentsEveryRoute builds the server exactly as serve does and compares its
// registered routes with the embedded OpenAPI document, both ways. Nothing is exempt: the
// probes, /metrics and /openapi.yaml are documented too.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(pool, saga.New(pool, saga.Options{Logger: log}), prov.Gateway, prov.Merchant, wallet.Options{Logger: log})
	require.NoError(t, err)
	cfg := config{ServiceToken: DevServiceToken}
	e := newServer(cfg, log, svc, metrics.NewRegistry())

	binarytest.RequireDocumented(t, e, httpapi.OpenAPI, "internal/wallet/httpapi/openapi.yaml", 20)
}

// The document lists the kinds the code knows, in the code's order: an event's kind is one
// of walletevent's (the one list of them), a saga's one of the wallet's registered kinds,
// and the codes a user reads of a saga's error are wallet.PublicCodes.
func TestOpenAPIKindsAreTheCodes(t *testing.T) {
	t.Parallel()
	var events []string
	for _, k := range walletevent.Kinds() {
		events = append(events, string(k))
	}
	got, err := openapicheck.Enum(httpapi.OpenAPI, "components", "schemas", "Event", "properties", "kind")
	require.NoError(t, err)
	require.Equal(t, events, got, "internal/wallet/httpapi/openapi.yaml: Event.kind")
	for _, schema := range []string{"Saga", "OperatorSaga"} {
		got, err = openapicheck.Enum(httpapi.OpenAPI, "components", "schemas", schema, "properties", "kind")
		require.NoError(t, err)
		require.Equal(t, wallet.Kinds(), got, "internal/wallet/httpapi/openapi.yaml: %s.kind", schema)
	}
	got, err = openapicheck.Enum(httpapi.OpenAPI, "components", "schemas", "SagaError", "properties", "code")
	require.NoError(t, err)
	require.Equal(t, wallet.PublicCodes(), got, "internal/wallet/httpapi/openapi.yaml: SagaError.code")
}
