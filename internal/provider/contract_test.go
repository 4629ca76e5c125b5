package provider_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// contractRouter finds a request's operation in the contract's document, whatever host
// serves it.
var contractRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(provider.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	doc.Servers = nil
	return gorillamux.NewRouter(doc)
})

// conforming is a transport that holds every request the adapters send, and every answer
// they get, to the OpenAPI document (kin-openapi's openapi3filter): an answer the document
// does not describe, by status or by body, fails the test.
type conforming struct {
	t     *testing.T
	next  http.RoundTripper
	mu    sync.Mutex
	calls int
}

func (c *conforming) RoundTrip(req *http.Request) (*http.Response, error) {
	router, err := contractRouter()
	require.NoError(c.t, err)
	body, err := io.ReadAll(req.Body)
	require.NoError(c.t, err)
	req.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s %s: not an operation of the contract: %v", req.Method, req.URL.Path, err)
		return c.next.RoundTrip(req)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
		c.t.Errorf("%s %s: the adapter sent what the contract does not describe: %v", req.Method, req.URL.Path, err)
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err // no answer (a lost response, a timeout): nothing to hold to the document
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(answer)
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		c.t.Errorf("%s %s: the simulator answered %d %s, which the contract does not describe: %v", req.Method, req.URL.Path, resp.StatusCode, answer, err)
	}
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return resp, nil
}

// adapters returns a gateway and merchant for p whose calls go through a conforming
// transport, with token and timeout.
func adapters(t *testing.T, p *simtest.Provider, token string, timeout time.Duration) (*provider.Gateway, *provider.Merchant, *conforming) {
	t.Helper()
	c := &conforming{t: t, next: http.DefaultTransport}
	o := provider.Options{URL: p.URL, Token: token, Timeout: timeout, Transport: c}
	gw, err := provider.NewGateway(o)
	require.NoError(t, err)
	m, err := provider.NewMerchant(o)
	require.NoError(t, err)
	return gw, m, c
}

func requirePermanent(t *testing.T, err error, code string) {
	t.Helper()
	got, permanent := wallet.IsPermanent(err)
	require.True(t, permanent, "want permanent %s, got %v", code, err)
	require.Equal(t, code, got, "%v", err)
}

// The contract, through the adapters, on the simulator with each of its stores; every call
// and answer is held to the OpenAPI document on the way.
func TestAdaptersOnTheSimulator(t *testing.T) {
	t.Parallel()
	t.Run("memory store", func(t *testing.T) {
		t.Parallel()
		contractSuite(t, providersim.NewMemoryStore())
	})
	t.Run("postgres store", func(t *testing.T) {
		t.Parallel()
		pool, _ := testdb.New(t)
		v, err := providersim.Migrate(t.Context(), pool, nil)
		require.NoError(t, err)
		require.EqualValues(t, 2, v)
		v, err = providersim.Migrate(t.Context(), pool, nil)
		require.NoError(t, err, "migrating again does nothing")
		require.EqualValues(t, 2, v)
		var own int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT max(version_id) FROM providersim.goose_db_version`).Scan(&own))
		require.Equal(t, 2, own, "the simulator's versions are in its own table")
		// The wallet's sequence has no version 1 (it starts at 2): a version 1 in its table
		// would be the simulator's first, recorded in the product's table.
		var product int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM goose_db_version WHERE version_id = 1`).Scan(&product))
		require.Zero(t, product, "the product's version table holds the product's migrations only")
		contractSuite(t, providersim.NewPostgresStore(pool))
	})
}

func contractSuite(t *testing.T, store providersim.Store) {
	ctx := t.Context()
	p := simtest.Start(t, store, providersim.Options{})
	gw, m, conf := adapters(t, p, providersim.DevToken, 5*time.Second)

	t.Run("the same key is the same charge", func(t *testing.T) {
		first, err := gw.Charge(ctx, "1:charge", 7, 500, "CNY", "card")
		require.NoError(t, err)
		again, err := gw.Charge(ctx, "1:charge", 7, 500, "CNY", "card")
		require.NoError(t, err)
		require.Equal(t, first, again, "asking again is the status query")
		_, err = gw.Charge(ctx, "1:charge", 7, 501, "CNY", "card")
		requirePermanent(t, err, provider.CodeIdempotencyMismatch)
	})
	t.Run("a declined source is declined for good, and has nothing to refund", func(t *testing.T) {
		_, err := gw.Charge(ctx, "2:charge", 7, 500, "CNY", providersim.DeclinedSource)
		requirePermanent(t, err, provider.CodeDeclined)
		_, err = gw.Charge(ctx, "2:charge", 7, 500, "CNY", providersim.DeclinedSource)
		requirePermanent(t, err, provider.CodeDeclined)
		require.NoError(t, gw.RefundByKey(ctx, "2:charge:compensate", "2:charge"))
	})
	t.Run("a refund of an unused key voids it", func(t *testing.T) {
		require.NoError(t, gw.RefundByKey(ctx, "3:charge:compensate", "3:charge"))
		require.NoError(t, gw.RefundByKey(ctx, "3:charge:compensate", "3:charge"), "idempotent")
		_, err := gw.Charge(ctx, "3:charge", 7, 500, "CNY", "card")
		requirePermanent(t, err, provider.CodeDeclined)
	})
	t.Run("a charge is refunded once, and asked again it is still that charge", func(t *testing.T) {
		id, err := gw.Charge(ctx, "4:charge", 7, 500, "CNY", "card")
		require.NoError(t, err)
		require.NoError(t, gw.RefundByKey(ctx, "4:charge:compensate", "4:charge"))
		require.NoError(t, gw.RefundByKey(ctx, "4:charge:compensate", "4:charge"))
		again, err := gw.Charge(ctx, "4:charge", 7, 500, "CNY", "card")
		require.NoError(t, err)
		require.Equal(t, id, again)
	})
	t.Run("the same key is the same order; a placed order cannot be cancelled", func(t *testing.T) {
		order, err := m.PlaceOrder(ctx, "5:place_order", "shop", "o-5", 300, "CNY")
		require.NoError(t, err)
		again, err := m.PlaceOrder(ctx, "5:place_order", "shop", "o-5", 300, "CNY")
		require.NoError(t, err)
		require.Equal(t, order, again)
		_, err = m.PlaceOrder(ctx, "5:place_order", "shop", "o-6", 300, "CNY")
		requirePermanent(t, err, provider.CodeIdempotencyMismatch)
		requirePermanent(t, m.CancelOrder(ctx, "5:place_order:compensate", "5:place_order"), provider.CodeNotCancellable)
	})
	t.Run("a cancellation of an unused key voids it", func(t *testing.T) {
		require.NoError(t, m.CancelOrder(ctx, "6:place_order:compensate", "6:place_order"))
		require.NoError(t, m.CancelOrder(ctx, "6:place_order:compensate", "6:place_order"))
		_, err := m.PlaceOrder(ctx, "6:place_order", "shop", "o-6", 300, "CNY")
		requirePermanent(t, err, provider.CodeRejected)
	})
	t.Run("reject- is rejected and has nothing to cancel", func(t *testing.T) {
		_, err := m.PlaceOrder(ctx, "7:place_order", "shop", providersim.RejectPrefix+"7", 300, "CNY")
		requirePermanent(t, err, provider.CodeRejected)
		require.NoError(t, m.CancelOrder(ctx, "7:place_order:compensate", "7:place_order"))
	})
	t.Run("flaky- fails retryably, then is placed; a pending one can be cancelled", func(t *testing.T) {
		for range providersim.FlakyFailures {
			_, err := m.PlaceOrder(ctx, "8:place_order", "shop", providersim.FlakyPrefix+"8", 300, "CNY")
			requireRetryable(t, err, provider.CodeUnavailable)
		}
		_, err := m.PlaceOrder(ctx, "8:place_order", "shop", providersim.FlakyPrefix+"8", 300, "CNY")
		require.NoError(t, err)

		_, err = m.PlaceOrder(ctx, "9:place_order", "shop", providersim.FlakyPrefix+"9", 300, "CNY")
		requireRetryable(t, err, provider.CodeUnavailable)
		require.NoError(t, m.CancelOrder(ctx, "9:place_order:compensate", "9:place_order"))
		_, err = m.PlaceOrder(ctx, "9:place_order", "shop", providersim.FlakyPrefix+"9", 300, "CNY")
		requirePermanent(t, err, provider.CodeRejected)
	})
	t.Run("an outage does nothing and says so retryably", func(t *testing.T) {
		p.SetOutage(t, providersim.TargetGateway, providersim.OutageFail, time.Hour)
		_, err := gw.Charge(ctx, "10:charge", 7, 500, "CNY", "card")
		requireRetryable(t, err, provider.CodeUnavailable)
		requireRetryable(t, gw.RefundByKey(ctx, "1:charge:compensate", "1:charge"), provider.CodeUnavailable)
		_, err = m.PlaceOrder(ctx, "11:place_order", "shop", "o-11", 300, "CNY")
		require.NoError(t, err, "the merchant is not out")

		p.SetOutage(t, providersim.TargetGateway, providersim.OutageTimeout, time.Hour)
		quick, _, _ := adapters(t, p, providersim.DevToken, 100*time.Millisecond)
		_, err = quick.Charge(ctx, "10:charge", 7, 500, "CNY", "card")
		requireRetryable(t, err, provider.CodeTimeout)

		p.SetOutage(t, providersim.TargetGateway, providersim.OutageFail, 0)
		for _, c := range p.Charges(t) {
			require.NotEqual(t, "10:charge", c.Key, "nothing happened during the outage")
		}
		_, err = gw.Charge(ctx, "10:charge", 7, 500, "CNY", "card")
		require.NoError(t, err, "over")
	})
	t.Run("the same key is the same payout; a paid payout cannot be cancelled", func(t *testing.T) {
		id, err := gw.Payout(ctx, "13:payout", 7, 400, "CNY", "bank 6222-0001")
		require.NoError(t, err)
		again, err := gw.Payout(ctx, "13:payout", 7, 400, "CNY", "bank 6222-0001")
		require.NoError(t, err)
		require.Equal(t, id, again, "asking again is the status query")
		_, err = gw.Payout(ctx, "13:payout", 7, 400, "CNY", "bank 6222-0002")
		requirePermanent(t, err, provider.CodeIdempotencyMismatch)
		requirePermanent(t, gw.CancelPayout(ctx, "13:payout:compensate", "13:payout"), provider.CodeNotCancellable)
	})
	t.Run("a cancellation of an unused payout key voids it", func(t *testing.T) {
		require.NoError(t, gw.CancelPayout(ctx, "14:payout:compensate", "14:payout"))
		require.NoError(t, gw.CancelPayout(ctx, "14:payout:compensate", "14:payout"), "idempotent")
		_, err := gw.Payout(ctx, "14:payout", 7, 400, "CNY", "bank")
		requirePermanent(t, err, provider.CodeRejected)
	})
	t.Run("a reject- destination is refused for good and has nothing to cancel", func(t *testing.T) {
		_, err := gw.Payout(ctx, "15:payout", 7, 400, "CNY", providersim.RejectPrefix+"bank")
		requirePermanent(t, err, provider.CodeRejected)
		_, err = gw.Payout(ctx, "15:payout", 7, 400, "CNY", providersim.RejectPrefix+"bank")
		requirePermanent(t, err, provider.CodeRejected)
		require.NoError(t, gw.CancelPayout(ctx, "15:payout:compensate", "15:payout"))
	})
	t.Run("a flaky- destination fails retryably, then is paid; a pending one can be cancelled", func(t *testing.T) {
		for range providersim.FlakyFailures {
			_, err := gw.Payout(ctx, "16:payout", 7, 400, "CNY", providersim.FlakyPrefix+"bank")
			requireRetryable(t, err, provider.CodeUnavailable)
		}
		_, err := gw.Payout(ctx, "16:payout", 7, 400, "CNY", providersim.FlakyPrefix+"bank")
		require.NoError(t, err)

		_, err = gw.Payout(ctx, "17:payout", 7, 400, "CNY", providersim.FlakyPrefix+"bank")
		requireRetryable(t, err, provider.CodeUnavailable)
		require.NoError(t, gw.CancelPayout(ctx, "17:payout:compensate", "17:payout"))
		_, err = gw.Payout(ctx, "17:payout", 7, 400, "CNY", providersim.FlakyPrefix+"bank")
		requirePermanent(t, err, provider.CodeRejected)
	})
	t.Run("payouts are the gateway's: its outage stops them", func(t *testing.T) {
		p.SetOutage(t, providersim.TargetGateway, providersim.OutageFail, time.Hour)
		_, err := gw.Payout(ctx, "18:payout", 7, 400, "CNY", "bank")
		requireRetryable(t, err, provider.CodeUnavailable)
		requireRetryable(t, gw.CancelPayout(ctx, "18:payout:compensate", "18:payout"), provider.CodeUnavailable)
		p.SetOutage(t, providersim.TargetGateway, providersim.OutageFail, 0)
	})
	t.Run("a wrong token is refused for good", func(t *testing.T) {
		bad, _, _ := adapters(t, p, "not-the-token-at-all", 5*time.Second)
		_, err := bad.Charge(ctx, "12:charge", 7, 500, "CNY", "card")
		requirePermanent(t, err, provider.CodeUnauthorized)
	})

	charges := map[string]string{}
	for _, c := range p.Charges(t) {
		charges[c.Key] = c.Status
	}
	require.Equal(t, map[string]string{
		"1:charge": providersim.ChargeCharged, "2:charge": providersim.ChargeDeclined, "3:charge": providersim.ChargeVoided,
		"4:charge": providersim.ChargeRefunded, "10:charge": providersim.ChargeCharged,
	}, charges)
	orders := map[string]string{}
	for _, o := range p.Orders(t) {
		orders[o.Key] = o.Status
	}
	require.Equal(t, map[string]string{
		"5:place_order": providersim.OrderPlaced, "6:place_order": providersim.OrderVoided, "7:place_order": providersim.OrderRejected,
		"8:place_order": providersim.OrderPlaced, "9:place_order": providersim.OrderCancelled, "11:place_order": providersim.OrderPlaced,
	}, orders)
	payouts := map[string]string{}
	for _, po := range p.Payouts(t) {
		payouts[po.Key] = po.Status
	}
	require.Equal(t, map[string]string{
		"13:payout": providersim.PayoutPaid, "14:payout": providersim.PayoutVoided, "15:payout": providersim.PayoutRejected,
		"16:payout": providersim.PayoutPaid, "17:payout": providersim.PayoutCancelled,
	}, payouts, "nothing happened during the outage")
	require.Positive(t, conf.calls)
}
