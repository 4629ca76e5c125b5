package providersim_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

func serve(t *testing.T, o providersim.Options) (*providersim.Simulator, *httptest.Server) {
	t.Helper()
	sim, err := providersim.New(providersim.NewMemoryStore(), o)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); srv.Close() })
	return sim, srv
}

func post(t *testing.T, url, token, key, body string) (int, provider.ErrorDetail) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set(provider.HeaderIdempotencyKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e provider.ErrorBody
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	}
	return resp.StatusCode, e.Error
}

// Every bad request gets a 400 (or 401, 404) with the error body and does nothing.
func TestSimulatorRefusesBadRequests(t *testing.T) {
	t.Parallel()
	sim, srv := serve(t, providersim.Options{})
	charges := srv.URL + provider.PathCharges
	good := `{"user_id":1,"amount":5,"currency":"CNY","source":"card"}`
	for _, tc := range []struct {
		name, url, token, key, body string
		status                      int
		code                        string
	}{
		{"no token", charges, "", "1:charge", good, 401, provider.CodeUnauthorized},
		{"wrong token", charges, "wrong", "1:charge", good, 401, provider.CodeUnauthorized},
		{"no key", charges, providersim.DevToken, "", good, 400, provider.CodeInvalidRequest},
		{"key with a space", charges, providersim.DevToken, "1 charge", good, 400, provider.CodeInvalidRequest},
		{"key too long", charges, providersim.DevToken, strings.Repeat("k", 256), good, 400, provider.CodeInvalidRequest},
		{"not JSON", charges, providersim.DevToken, "1:charge", `amount=5`, 400, provider.CodeInvalidRequest},
		{"unknown field", charges, providersim.DevToken, "1:charge", `{"user_id":1,"amount":5,"currency":"CNY","source":"card","tip":1}`, 400, provider.CodeInvalidRequest},
		{"two values", charges, providersim.DevToken, "1:charge", good + good, 400, provider.CodeInvalidRequest},
		{"zero amount", charges, providersim.DevToken, "1:charge", `{"user_id":1,"amount":0,"currency":"CNY","source":"card"}`, 400, provider.CodeInvalidRequest},
		{"no user", charges, providersim.DevToken, "1:charge", `{"amount":5,"currency":"CNY","source":"card"}`, 400, provider.CodeInvalidRequest},
		{"bad currency", charges, providersim.DevToken, "1:charge", `{"user_id":1,"amount":5,"currency":"cny","source":"card"}`, 400, provider.CodeInvalidRequest},
		{"empty source", charges, providersim.DevToken, "1:charge", `{"user_id":1,"amount":5,"currency":"CNY","source":""}`, 400, provider.CodeInvalidRequest},
		{"refund without a charge key", srv.URL + provider.PathRefunds, providersim.DevToken, "1:c", `{}`, 400, provider.CodeInvalidRequest},
		{"order without a merchant", srv.URL + provider.PathOrders, providersim.DevToken, "1:o", `{"reference":"r","amount":1,"currency":"CNY"}`, 400, provider.CodeInvalidRequest},
		{"cancellation without an order key", srv.URL + provider.PathOrderCancellations, providersim.DevToken, "1:c", `{"order_key":""}`, 400, provider.CodeInvalidRequest},
		{"payout without a destination", srv.URL + provider.PathPayouts, providersim.DevToken, "1:p", `{"user_id":1,"amount":5,"currency":"CNY"}`, 400, provider.CodeInvalidRequest},
		{"payout of a negative amount", srv.URL + provider.PathPayouts, providersim.DevToken, "1:p", `{"user_id":1,"amount":-5,"currency":"CNY","destination":"bank"}`, 400, provider.CodeInvalidRequest},
		{"payout with an unknown field", srv.URL + provider.PathPayouts, providersim.DevToken, "1:p", `{"user_id":1,"amount":5,"currency":"CNY","destination":"bank","iban":"x"}`, 400, provider.CodeInvalidRequest},
		{"payout without a token", srv.URL + provider.PathPayouts, "", "1:p", `{"user_id":1,"amount":5,"currency":"CNY","destination":"bank"}`, 401, provider.CodeUnauthorized},
		{"payout cancellation with a bad payout key", srv.URL + provider.PathPayoutCancellations, providersim.DevToken, "1:c", `{"payout_key":"1 payout"}`, 400, provider.CodeInvalidRequest},
		{"no such route", srv.URL + "/v1/transfers", providersim.DevToken, "1:t", `{}`, 404, "not_found"},
	} {
		status, e := post(t, tc.url, tc.token, tc.key, tc.body)
		require.Equal(t, tc.status, status, tc.name)
		require.Equal(t, tc.code, e.Code, tc.name)
		require.NotEmpty(t, e.Message, tc.name)
	}
	cs, err := sim.Store().Charges(t.Context())
	require.NoError(t, err)
	require.Empty(t, cs, "nothing was charged")
	ps, err := sim.Store().Payouts(t.Context())
	require.NoError(t, err)
	require.Empty(t, ps, "nothing was paid out")
}

// /healthz and /openapi.yaml are open; the document served is the contract's.
func TestSimulatorServesHealthAndItsContract(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, providersim.Options{})
	for path, want := range map[string]string{"/healthz": `{"status":"ok"}`, "/openapi.yaml": string(provider.OpenAPI())} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, strings.TrimSpace(want), strings.TrimSpace(string(b)), path)
	}
}

// `providersim outage` prints its error: the simulator's URL in it shows no password or key.
func TestOutageErrorNamesTheURLWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	err = providersim.RequestOutage(t.Context(), "http://acct:s3cret-pw@"+addr+"/?token=s3cret-key", providersim.DevToken,
		providersim.TargetGateway, providersim.OutageFail, time.Second)
	require.ErrorContains(t, err, "http://"+addr+providersim.PathOutages+"?token=xxxxx")
	require.NotContains(t, err.Error(), "s3cret")
}

// The control endpoint switches outages (what `providersim outage` calls), refuses what it
// does not know, and wants the token.
func TestOutageControl(t *testing.T) {
	t.Parallel()
	_, srv := serve(t, providersim.Options{})
	ctx := t.Context()
	charge := func() int {
		status, _ := post(t, srv.URL+provider.PathCharges, providersim.DevToken, "1:charge", `{"user_id":1,"amount":5,"currency":"CNY","source":"card"}`)
		return status
	}
	require.NoError(t, providersim.RequestOutage(ctx, srv.URL, providersim.DevToken, providersim.TargetGateway, providersim.OutageFail, time.Hour))
	require.Equal(t, http.StatusServiceUnavailable, charge())
	status, _ := post(t, srv.URL+provider.PathOrders, providersim.DevToken, "1:o", `{"merchant":"m","reference":"r","amount":1,"currency":"CNY"}`)
	require.Equal(t, http.StatusOK, status, "the merchant is not out")
	require.NoError(t, providersim.RequestOutage(ctx, srv.URL, providersim.DevToken, providersim.TargetGateway, providersim.OutageFail, 0))
	require.Equal(t, http.StatusOK, charge(), "0 ends it")

	require.NoError(t, providersim.RequestOutage(ctx, srv.URL, providersim.DevToken, providersim.TargetMerchant, providersim.OutageTimeout, 50*time.Millisecond))
	wait.Until(t, 5*time.Second, "the outage to end when its time is up", func() bool {
		status, _ := post(t, srv.URL+provider.PathOrders, providersim.DevToken, "2:o", `{"merchant":"m","reference":"r","amount":1,"currency":"CNY"}`)
		return status == http.StatusOK
	})

	require.ErrorContains(t, providersim.RequestOutage(ctx, srv.URL, providersim.DevToken, "bank", "fail", time.Second), "target must be")
	require.ErrorContains(t, providersim.RequestOutage(ctx, srv.URL, providersim.DevToken, "gateway", "sometimes", time.Second), "mode must be")
	require.ErrorContains(t, providersim.RequestOutage(ctx, srv.URL, "wrong-token", "gateway", "fail", time.Second), "HTTP 401")
	status, e := post(t, srv.URL+providersim.PathOutages, providersim.DevToken, "", `{"target":"gateway","mode":"fail","duration":"soon"}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, e.Message, `duration "soon"`)
}

// With every call failing, half fail before doing anything (503) and half after, their
// answer lost (the connection closes): then the work is done, and the same key finds it.
func TestInjectedFailuresLoseResponsesAfterTheWork(t *testing.T) {
	t.Parallel()
	sim, srv := serve(t, providersim.Options{FailureRate: 1})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var before, lost int
	for i := range 40 {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+provider.PathCharges,
			strings.NewReader(`{"user_id":1,"amount":5,"currency":"CNY","source":"card"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+providersim.DevToken)
		req.Header.Set(provider.HeaderIdempotencyKey, "k"+strings.Repeat("x", i))
		resp, err := client.Do(req)
		if err != nil {
			lost++
			continue
		}
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		before++
	}
	require.Positive(t, before)
	require.Positive(t, lost)
	cs, err := sim.Store().Charges(t.Context())
	require.NoError(t, err)
	require.Len(t, cs, lost, "a lost answer's charge was made; a failure before made none")
}

// 409 means one thing: a call under the same key is still being processed. Of two calls
// under one key at once, one is processed and the other answered 409 in_progress; asked
// again once the first finished, the key gets its result (the same charge), never 409.
func TestACallUnderAKeyInProgressIs409(t *testing.T) {
	t.Parallel()
	sim, srv := serve(t, providersim.Options{Latency: time.Second})
	const body = `{"user_id":1,"amount":5,"currency":"CNY","source":"card"}`
	type answer struct {
		status int
		code   string
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+provider.PathCharges, strings.NewReader(body))
			if err != nil {
				answers <- answer{code: err.Error()}
				return
			}
			req.Header.Set("Authorization", "Bearer "+providersim.DevToken)
			req.Header.Set(provider.HeaderIdempotencyKey, "7:charge")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{code: err.Error()}
				return
			}
			defer resp.Body.Close()
			var e provider.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&e)
			answers <- answer{resp.StatusCode, e.Error.Code}
		}()
	}
	got := []answer{<-answers, <-answers}
	require.ElementsMatch(t, []answer{{http.StatusOK, ""}, {http.StatusConflict, provider.CodeInProgress}}, got)
	status, _ := post(t, srv.URL+provider.PathCharges, providersim.DevToken, "7:charge", body)
	require.Equal(t, http.StatusOK, status, "a finished call's key gets its result again")
	cs, err := sim.Store().Charges(t.Context())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	status, _ = post(t, srv.URL+provider.PathOrders, providersim.DevToken, "7:charge", `{"merchant":"m","reference":"r","amount":1,"currency":"CNY"}`)
	require.Equal(t, http.StatusOK, status, "another operation's key is another key")
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	_, err := providersim.New(nil, providersim.Options{})
	require.Error(t, err)
	_, err = providersim.New(providersim.NewMemoryStore(), providersim.Options{FailureRate: 1.5})
	require.Error(t, err)
	_, err = providersim.New(providersim.NewMemoryStore(), providersim.Options{Latency: -time.Second})
	require.Error(t, err)
	sim, err := providersim.New(providersim.NewMemoryStore(), providersim.Options{})
	require.NoError(t, err)
	require.Error(t, sim.SetOutage("gateway", "fail", -time.Second))
}
