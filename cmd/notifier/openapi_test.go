package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestOpenAPIDocumentsEveryRoute builds the server exactly as serve does and compares its
// registered routes with the embedded OpenAPI document, both ways. Nothing is exempt: the
// probes, /metrics, /openapi.yaml, the page and its assets are documented too.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, bad := gate.NewStore(pool), inbox.NewStore(pool)
	lanes, err := gate.NewLanes(g, gate.LaneConfig{Owner: "openapi-test", Policy: gate.DefaultRetryPolicy, Sender: senders.NewLogSender(nil), Logger: log})
	require.NoError(t, err)
	view := &httpapi.Gate{Store: g, Lanes: lanes, Inbox: inbox.NewInbox(bad, g, nil, log),
		DLQBacklog: deadletters.NewPublisher(g, bad, nil, 0, log).Backlog, GapAlertAfter: time.Minute}
	e := newServer(config{}, log, pool, view, deadletters.NewOperator(pool, g, senders.NewLogSender(nil)), metrics.NewRegistry())

	binarytest.RequireDocumented(t, e, httpapi.OpenAPI, "internal/notify/httpapi/openapi.yaml", 18)
}

// The document's SMS kinds are walletevent's (the one list of them), in its order, and ""
// for an SMS not rendered.
func TestOpenAPIKindsAreTheWalletEvents(t *testing.T) {
	t.Parallel()
	var want []string
	for _, k := range walletevent.Kinds() {
		want = append(want, string(k))
	}
	got, err := openapicheck.Enum(httpapi.OpenAPI, "components", "schemas", "Kind")
	require.NoError(t, err)
	require.Equal(t, append(want, ""), got, "internal/notify/httpapi/openapi.yaml: Kind")
}
