package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

// A gateway nobody answers at: every charge, then every refund, fails with the HTTP
// client's error, which names the gateway's address; the saga ends needing attention with
// that error in its history. Its user reads codes and fixed messages only, on every route
// that shows a saga; an operator reads what was stored.
func TestAProvidersAddressInAStepErrorNeverReachesTheUser(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: connection refused

	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := saga.New(pool, saga.Options{PollInterval: 50 * time.Millisecond, Logger: log})
	gateway, err := provider.NewGateway(provider.Options{URL: "http://" + addr, Token: "gateway-token-0123456789", Timeout: time.Second})
	require.NoError(t, err)
	prov := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(pool, eng, gateway, prov.Merchant, wallet.Options{Logger: log,
		Steps: wallet.StepTuning{Window: 300 * time.Millisecond, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}})
	require.NoError(t, err)
	e := httpx.New(httpx.Options{Logger: log})
	httpapi.Register(e, svc, httpapi.Options{ServiceToken: serviceToken, Operators: operators, Logger: log})
	ts := httptest.NewServer(e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	require.NoError(t, eng.Recovery().Start(ctx))
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, eng.Recovery().Stop(context.Background()))
		cancel()
	})
	s := &server{url: ts.URL, pool: pool, ctx: ctx, echo: e}
	u := s.createUser(t)

	// What the user reads must not hold any of this: the address, the call, the client's words.
	leaks := []string{addr, "127.0.0.1", "/v1/charges", "/v1/refunds", "connection refused", "dial tcp", "gave up after"}
	requireNoLeak := func(res response) {
		t.Helper()
		for _, l := range leaks {
			require.NotContains(t, res.raw, l)
		}
	}

	res := s.do(t, http.MethodPost, fmt.Sprintf("/v1/users/%d/deposits?wait=true", u), `{"amount":1000}`)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, res.status, res.raw)
	requireNoLeak(res)
	id := int64(res.body["id"].(float64))
	op, err := svc.WaitSaga(ctx, id)
	require.NoError(t, err)
	require.Equal(t, saga.NeedsAttention, op.State, "the refund by key could not be asked either")
	require.Contains(t, op.Error.Message, addr, "the stored error names the address (the test's premise)")

	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/sagas/%d", id), "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	requireNoLeak(res)
	require.Equal(t, map[string]any{"code": wallet.PublicCompensationFailed, "message": "the operation failed and undoing it failed too: an operator will settle it"}, res.body["error"])
	steps := res.body["steps"].([]any)
	require.NotEmpty(t, steps)
	for _, st := range steps {
		if e, ok := st.(map[string]any)["error"].(map[string]any); ok {
			require.Contains(t, wallet.PublicCodes(), e["code"], res.raw)
		}
	}
	charge := steps[0].(map[string]any)
	require.Equal(t, "charge", charge["name"])
	require.Equal(t, wallet.PublicProviderUnavailable, charge["error"].(map[string]any)["code"], res.raw)

	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/sagas?user_id=%d", u), "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	requireNoLeak(res)
	require.Len(t, res.body["items"], 1)

	// The operator reads it as stored, on the operator routes.
	admin := []string{"Authorization", "Bearer " + aliceToken}
	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/operator/sagas/%d", id), "", admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Contains(t, res.raw, addr)
	require.Equal(t, saga.CodeCompensationFailed, res.body["error"].(map[string]any)["code"])
	res = s.do(t, http.MethodGet, "/v1/operator/sagas?state=needs_attention", "", admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Contains(t, res.raw, addr)
	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/operator/sagas/%d", id), "")
	require.Equal(t, http.StatusForbidden, res.status, "the service token does not read the stored errors")
}
