package provider_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

const stubToken = "hostile-stub-token-0123456789"

// hostile is a gateway that misbehaves as told, and keeps the charges and payouts it made,
// one per key.
type hostile struct {
	t       *testing.T
	mu      sync.Mutex
	calls   map[string]int    // calls per Idempotency-Key
	charges map[string]string // key → charge id
	behave  func(w http.ResponseWriter, r *http.Request, call int) bool
}

// newHostile serves a hostile gateway; behave answers a call itself (returning true) or
// leaves it to the well-behaved gateway.
func newHostile(t *testing.T, behave func(w http.ResponseWriter, r *http.Request, call int) bool) (*hostile, *provider.Gateway) {
	t.Helper()
	h := &hostile{t: t, calls: map[string]int{}, charges: map[string]string{}, behave: behave}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			http.Error(w, "closing", http.StatusServiceUnavailable)
			return
		default:
		}
		h.serve(w, r)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	gw, err := provider.NewGateway(provider.Options{URL: srv.URL, Token: stubToken, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	return h, gw
}

func (h *hostile) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(provider.HeaderIdempotencyKey)
	// What every call must carry, whatever the stub answers.
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+stubToken || key == "" ||
		r.Header.Get("Content-Type") != "application/json" {
		h.t.Errorf("call without the contract's method or headers: %s %s %v", r.Method, r.URL.Path, r.Header)
	}
	h.mu.Lock()
	h.calls[key]++
	call := h.calls[key]
	h.mu.Unlock()
	if h.behave != nil && h.behave(w, r, call) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case provider.PathPayouts:
		_ = json.NewEncoder(w).Encode(provider.Payout{PayoutID: h.charge(key), Status: provider.PayoutPaid})
	case provider.PathPayoutCancellations:
		var req provider.PayoutCancellationRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(provider.PayoutCancellation{PayoutKey: req.PayoutKey, Status: provider.CancelVoided})
	default:
		_ = json.NewEncoder(w).Encode(provider.Charge{ChargeID: h.charge(key), Status: provider.ChargeCharged})
	}
}

// charge makes the charge (or payout) for key, once.
func (h *hostile) charge(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := h.charges[key]; ok {
		return id
	}
	id := "ch_" + key
	h.charges[key] = id
	return id
}

func (h *hostile) count(key string) (calls, charges int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.charges[key]; ok {
		charges = 1
	}
	return h.calls[key], charges
}

func charge(gw *provider.Gateway, key string) (string, error) {
	return gw.Charge(context.Background(), key, 7, 500, "CNY", "card")
}

// requireRetryable requires err to be a retryable RemoteError with code, and returns its
// RetryAfter.
func requireRetryable(t *testing.T, err error, code string) (retryAfter time.Duration) {
	t.Helper()
	var re *wallet.RemoteError
	require.ErrorAs(t, err, &re)
	require.False(t, re.Permanent, "%v", err)
	require.Equal(t, code, re.Code, "%v", err)
	return re.RetryAfter
}

// Answers the contract calls uncertain are retryable, each with its code; nothing is retried
// by the adapter itself.
func TestAdapterClassifiesAHostileProvider(t *testing.T) {
	t.Parallel()
	write := func(status int, header map[string]string, body string) func(http.ResponseWriter, *http.Request, int) bool {
		return func(w http.ResponseWriter, _ *http.Request, _ int) bool {
			for k, v := range header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
			return true
		}
	}
	for _, tc := range []struct {
		name   string
		behave func(http.ResponseWriter, *http.Request, int) bool
		code   string
		after  time.Duration
	}{
		{"slow beyond the timeout", func(w http.ResponseWriter, r *http.Request, _ int) bool {
			// The server notices the client gone only once the body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return true
		}, provider.CodeTimeout, 0},
		{"500", write(500, nil, `{"error":{"code":"internal","message":"boom"}}`), provider.CodeUnavailable, 0},
		{"502 from a proxy", write(502, map[string]string{"Content-Type": "text/html"}, "<html>bad gateway</html>"), provider.CodeUnavailable, 0},
		{"429 with Retry-After", write(429, map[string]string{"Retry-After": "7"}, `{"error":{"code":"rate_limited","message":"slow down"}}`), provider.CodeRateLimited, 7 * time.Second},
		{"503 with Retry-After", write(503, map[string]string{"Retry-After": "2"}, ""), provider.CodeUnavailable, 2 * time.Second},
		{"200 whose body is not JSON", write(200, map[string]string{"Content-Type": "text/html"}, "<html>ok</html>"), provider.CodeBadResponse, 0},
		{"200 of another shape", write(200, nil, `{"id":"ch_1","state":"ok"}`), provider.CodeBadResponse, 0},
		{"200 with an unknown status", write(200, nil, `{"charge_id":"ch_1","status":"maybe"}`), provider.CodeBadResponse, 0},
		{"200 cut short", write(200, nil, `{"charge_id":"ch_`), provider.CodeBadResponse, 0},
		{"200 beyond the size bound", write(200, nil, `{"charge_id":"`+strings.Repeat("x", 70<<10)+`","status":"charged"}`), provider.CodeBadResponse, 0},
		{"201", write(201, nil, `{"charge_id":"ch_1","status":"charged"}`), provider.CodeBadResponse, 0},
		{"404 without the error body", write(404, nil, "404 page not found"), provider.CodeBadResponse, 0},
		{"a redirect", write(307, map[string]string{"Location": "/elsewhere"}, ""), provider.CodeBadResponse, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, gw := newHostile(t, tc.behave)
			start := time.Now()
			_, err := charge(gw, "1:charge")
			require.Equal(t, tc.after, requireRetryable(t, err, tc.code))
			require.Less(t, time.Since(start), 5*time.Second, "bounded by the per-call timeout")
			calls, _ := h.count("1:charge")
			require.Equal(t, 1, calls, "the adapter never asks again by itself")
		})
	}
}

// A refusal with the documented body is permanent, with its code.
func TestAdapterTakesADocumentedRefusalAsPermanent(t *testing.T) {
	t.Parallel()
	_, gw := newHostile(t, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"error":{"code":"declined","message":"insufficient credit"}}`))
		return true
	})
	_, err := charge(gw, "1:charge")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, "declined", code)
	require.ErrorContains(t, err, "insufficient credit")
}

// The gateway charges, then the response is lost (the connection closes unanswered, on a
// connection the client reused, where Go's transport would replay a request that carries an
// Idempotency-Key): the adapter reports it as retryable after exactly one call, and asking
// again with the same key yields the same charge, made once.
func TestLostResponseAfterTheChargeIsAskedAgainWithTheSameKey(t *testing.T) {
	t.Parallel()
	var h *hostile
	h, gw := newHostile(t, func(w http.ResponseWriter, r *http.Request, call int) bool {
		if r.Header.Get(provider.HeaderIdempotencyKey) != "2:charge" || call > 1 {
			return false
		}
		h.charge("2:charge")
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return true
		}
		_ = conn.Close()
		return true
	})
	// A first call opens the connection the lost one will reuse.
	warm, err := charge(gw, "1:charge")
	require.NoError(t, err)
	require.Equal(t, "ch_1:charge", warm)

	_, err = charge(gw, "2:charge")
	requireRetryable(t, err, provider.CodeUnavailable)
	calls, charges := h.count("2:charge")
	require.Equal(t, 1, calls, "the transport did not replay the call")
	require.Equal(t, 1, charges, "the gateway charged")

	id, err := charge(gw, "2:charge")
	require.NoError(t, err, "asking again with the same key is the status query")
	require.Equal(t, "ch_2:charge", id)
	calls, charges = h.count("2:charge")
	require.Equal(t, 2, calls)
	require.Equal(t, 1, charges, "no second charge")
}

func TestAdapterOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []provider.Options{
		{URL: "", Token: stubToken},
		{URL: "ftp://x", Token: stubToken},
		{URL: "http://", Token: stubToken},
		{URL: "http://127.0.0.1:1", Token: ""},
		{URL: "http://127.0.0.1:1", Token: stubToken, Timeout: -time.Second},
	} {
		_, err := provider.NewGateway(o)
		require.Error(t, err, "%+v", o)
		_, err = provider.NewMerchant(o)
		require.Error(t, err, "%+v", o)
	}
	// Nobody listens: a connection error, retryable.
	gw, err := provider.NewGateway(provider.Options{URL: "http://127.0.0.1:1", Token: stubToken})
	require.NoError(t, err)
	_, err = charge(gw, "1:charge")
	requireRetryable(t, err, provider.CodeUnavailable)
}

// A call's error is stored in the saga's history and logged: it names the provider's host,
// the path called and the parameters, never a user, password or key the configured URL
// carries (redact.URL).
func TestAdapterErrorsNameTheURLWithoutCredentials(t *testing.T) {
	t.Parallel()
	gw, err := provider.NewGateway(provider.Options{URL: "http://acct:s3cret@127.0.0.1:1/base?api_key=k3y", Token: stubToken})
	require.NoError(t, err)
	_, err = charge(gw, "1:charge")
	requireRetryable(t, err, provider.CodeUnavailable)
	require.Contains(t, err.Error(), "http://127.0.0.1:1/base/v1/charges?api_key=xxxxx")
	for _, secret := range []string{"acct", "s3cret", "k3y", stubToken} {
		require.NotContains(t, err.Error(), secret)
	}
	_, err = provider.NewGateway(provider.Options{URL: "ftp://acct:s3cret@host/?api_key=k3y", Token: stubToken})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	require.NotContains(t, err.Error(), "k3y")
}

func payout(gw *provider.Gateway, key string) (string, error) {
	return gw.Payout(context.Background(), key, 7, 400, "CNY", "bank 6222-0001")
}

// Payouts and their cancellations are classified as charges are: an answer of another
// shape is uncertain, a documented refusal permanent; a payout whose response was lost is
// asked again with the same key, and the gateway pays once.
func TestAdapterClassifiesHostilePayouts(t *testing.T) {
	t.Parallel()
	write := func(path string, status int, body string) func(http.ResponseWriter, *http.Request, int) bool {
		return func(w http.ResponseWriter, r *http.Request, _ int) bool {
			if r.URL.Path != path {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
			return true
		}
	}
	for _, tc := range []struct {
		name   string
		behave func(http.ResponseWriter, *http.Request, int) bool
		cancel bool
		code   string
	}{
		{"payout 200 of a charge's shape", write(provider.PathPayouts, 200, `{"charge_id":"ch_1","status":"charged"}`), false, provider.CodeBadResponse},
		{"payout 200 with an unknown status", write(provider.PathPayouts, 200, `{"payout_id":"po_1","status":"sent"}`), false, provider.CodeBadResponse},
		{"payout 200 without an id", write(provider.PathPayouts, 200, `{"payout_id":"","status":"paid"}`), false, provider.CodeBadResponse},
		{"payout 504", write(provider.PathPayouts, 504, ""), false, provider.CodeUnavailable},
		{"cancellation 200 with an unknown status", write(provider.PathPayoutCancellations, 200, `{"payout_key":"1:payout","status":"maybe"}`), true, provider.CodeBadResponse},
		{"cancellation 409", write(provider.PathPayoutCancellations, 409, `{"error":{"code":"in_progress","message":"busy"}}`), true, provider.CodeInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, gw := newHostile(t, tc.behave)
			var err error
			key := "1:payout"
			if tc.cancel {
				key = "1:payout:compensate"
				err = gw.CancelPayout(context.Background(), key, "1:payout")
			} else {
				_, err = payout(gw, key)
			}
			requireRetryable(t, err, tc.code)
			calls, _ := h.count(key)
			require.Equal(t, 1, calls, "the adapter never asks again by itself")
		})
	}

	_, gw := newHostile(t, write(provider.PathPayoutCancellations, 422, `{"error":{"code":"not_cancellable","message":"the money has left"}}`))
	err := gw.CancelPayout(context.Background(), "1:payout:compensate", "1:payout")
	code, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "%v", err)
	require.Equal(t, provider.CodeNotCancellable, code)
	_, well := newHostile(t, nil)
	require.NoError(t, well.CancelPayout(context.Background(), "2:payout:compensate", "2:payout"), "voided: nothing to cancel")

	var h *hostile
	h, gw = newHostile(t, func(w http.ResponseWriter, r *http.Request, call int) bool {
		if r.URL.Path != provider.PathPayouts || call > 1 {
			return false
		}
		h.charge(r.Header.Get(provider.HeaderIdempotencyKey))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return true
		}
		_ = conn.Close()
		return true
	})
	_, err = payout(gw, "3:payout")
	requireRetryable(t, err, provider.CodeUnavailable)
	id, err := payout(gw, "3:payout")
	require.NoError(t, err, "asking again with the same key is the status query")
	require.Equal(t, "ch_3:payout", id)
	calls, paid := h.count("3:payout")
	require.Equal(t, 2, calls)
	require.Equal(t, 1, paid, "paid once")
}

// TestASlowGatewayGetsABoundedNumberOfConnections: a gateway that holds every call open is
// called by 300 sagas at once; the adapter opens at most 128 connections to it (the rest wait
// for one, within their timeout), never one per call: a slow provider times a high request
// rate cannot take the process's file descriptors.
//
// It does not run in parallel: its 300 calls would slow the other tests' gateways, which
// answer within 300 ms, past their timeout.
func TestASlowGatewayGetsABoundedNumberOfConnections(t *testing.T) {
	var mu sync.Mutex
	open, most := 0, 0
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open++
			most = max(most, open)
		case http.StateClosed, http.StateHijacked:
			open--
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	gw, err := provider.NewGateway(provider.Options{URL: srv.URL, Token: stubToken, Timeout: 3 * time.Second})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			_, _ = gw.Charge(context.Background(), "k-"+strconv.Itoa(i), 1, 100, "CNY", "card")
		})
	}
	time.Sleep(time.Second) // the calls pile up against the held gateway: what the test is about
	mu.Lock()
	got := most
	mu.Unlock()
	close(release)
	wg.Wait()
	require.LessOrEqual(t, got, 128, "connections open at once to one provider")
	require.Positive(t, got)
}
