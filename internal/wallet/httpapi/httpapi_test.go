package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

const (
	serviceToken = "test-service-token-0123"
	adminToken   = "test-admin-token-0123456"
)

type server struct {
	url  string
	pool *pgxpool.Pool
	ctx  context.Context
}

func newServer(t *testing.T, runSagas bool) *server {
	t.Helper()
	pool, _ := testdb.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := saga.New(pool, saga.Options{PollInterval: 200 * time.Millisecond, Logger: log})
	svc, err := wallet.NewService(pool, eng, wallet.NewSimGateway(pool, wallet.SimOptions{}), wallet.NewSimMerchant(pool, wallet.SimOptions{}),
		wallet.Options{Logger: log, Steps: wallet.StepTuning{BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}})
	require.NoError(t, err)
	e := httpx.New(httpx.Options{Logger: log})
	httpapi.Register(e, svc, httpapi.Options{ServiceToken: serviceToken, AdminToken: adminToken, Logger: log})
	ts := httptest.NewServer(e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var wg sync.WaitGroup
	if runSagas {
		wg.Go(func() { _ = eng.Run(ctx) })
	}
	t.Cleanup(func() {
		ts.Close()
		cancel()
		wg.Wait()
	})
	return &server{url: ts.URL, pool: pool, ctx: ctx}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends a request; body "" sends none; a JSON content type is set unless headers say
// otherwise.
func (s *server) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(s.ctx, method, s.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+serviceToken)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := response{status: res.StatusCode, header: res.Header, raw: string(b)}
	if len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, &out.body), string(b))
	}
	return out
}

func (s *server) createUser(t *testing.T) int64 {
	t.Helper()
	res := s.do(t, http.MethodPost, "/v1/users", `{"name":"Li Lei","phone":"+8613800138000"}`)
	require.Equal(t, http.StatusCreated, res.status, res.raw)
	return int64(res.body["id"].(float64))
}

// counts is a fingerprint of every table a request could change.
func (s *server) counts(t *testing.T) string {
	t.Helper()
	var out string
	require.NoError(t, s.pool.QueryRow(s.ctx, `
SELECT concat_ws(',', (SELECT count(*) FROM users), (SELECT count(*) FROM wallets), (SELECT sum(balance) FROM wallets),
       (SELECT count(*) FROM sagas), (SELECT count(*) FROM wallet_operations), (SELECT count(*) FROM idempotency_keys),
       (SELECT count(*) FROM ledger_entries), (SELECT count(*) FROM wallet_events))`).Scan(&out))
	return out
}

func TestCreateUserAndGetWallet(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	res := s.do(t, http.MethodPost, "/v1/users", `{"name":"Han Meimei","phone":"+12025550123","locale":"en"}`)
	require.Equal(t, http.StatusCreated, res.status, res.raw)
	id := int64(res.body["id"].(float64))
	require.Positive(t, id)
	require.Equal(t, "Han Meimei", res.body["name"])
	require.Equal(t, "+12025550123", res.body["phone"])
	require.Equal(t, "en", res.body["locale"])
	require.Equal(t, map[string]any{"user_id": float64(id), "balance": float64(0), "currency": "CNY", "last_seq": float64(0)}, res.body["wallet"])

	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/users/%d/wallet", id), "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, map[string]any{"user_id": float64(id), "balance": float64(0), "currency": "CNY", "last_seq": float64(0)}, res.body)

	res = s.do(t, http.MethodPost, "/v1/users", `{"name":"Default Locale","phone":"+8613900139000"}`)
	require.Equal(t, http.StatusCreated, res.status)
	require.Equal(t, "zh-CN", res.body["locale"])

	res = s.do(t, http.MethodGet, fmt.Sprintf("/v1/users/%d/events", id), "")
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, []any{}, res.body["items"])
}

// Every bad request answers a 4xx JSON error with a precise message and changes nothing.
func TestBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	u := s.createUser(t)
	v := s.createUser(t)
	dep := fmt.Sprintf("/v1/users/%d/deposits", u)
	pur := fmt.Sprintf("/v1/users/%d/purchases", u)
	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code, msg                string
	}{
		{"phone without plus", "POST", "/v1/users", `{"name":"a","phone":"8613800138000"}`, nil, 400, "invalid", "E.164"},
		{"phone too short", "POST", "/v1/users", `{"name":"a","phone":"+1234567"}`, nil, 400, "invalid", "E.164"},
		{"phone with letters", "POST", "/v1/users", `{"name":"a","phone":"+86138abc0000"}`, nil, 400, "invalid", "E.164"},
		{"name missing", "POST", "/v1/users", `{"phone":"+8613800138000"}`, nil, 400, "invalid", "name is required"},
		{"name wrong type", "POST", "/v1/users", `{"name":1,"phone":"+8613800138000"}`, nil, 400, "invalid", `"name"`},
		{"locale unknown", "POST", "/v1/users", `{"name":"a","phone":"+8613800138000","locale":"fr"}`, nil, 400, "invalid", "locale"},
		{"unknown field", "POST", "/v1/users", `{"name":"a","phone":"+8613800138000","admin":true}`, nil, 400, "invalid", "unknown field"},
		{"two objects", "POST", "/v1/users", `{"name":"a","phone":"+8613800138000"}{}`, nil, 400, "invalid", "single JSON object"},
		{"empty body", "POST", "/v1/users", ``, nil, 400, "invalid", "empty"},
		{"not json", "POST", "/v1/users", `name=a`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", "application/json"},
		{"body over 64K", "POST", "/v1/users", `{"name":"` + strings.Repeat("a", 70<<10) + `","phone":"+8613800138000"}`, nil, 413, "too_large", "too large"},

		{"wallet id not a number", "GET", "/v1/users/abc/wallet", "", nil, 400, "invalid", "positive 64-bit integer"},
		{"wallet id zero", "GET", "/v1/users/0/wallet", "", nil, 400, "invalid", "positive"},
		{"wallet id negative", "GET", "/v1/users/-3/wallet", "", nil, 400, "invalid", "positive"},
		{"wallet id beyond int64", "GET", "/v1/users/99999999999999999999/wallet", "", nil, 400, "invalid", "64-bit"},
		{"wallet unknown user", "GET", "/v1/users/999999/wallet", "", nil, 404, "not_found", "user 999999 not found"},
		{"events unknown user", "GET", "/v1/users/999999/events", "", nil, 404, "not_found", "not found"},

		{"amount fraction", "POST", dep, `{"amount":100.5}`, nil, 400, "invalid", "integer number of minor units"},
		{"amount exponent", "POST", dep, `{"amount":1e3}`, nil, 400, "invalid", "exponent"},
		{"amount string", "POST", dep, `{"amount":"100"}`, nil, 400, "invalid", "not a string"},
		{"amount negative", "POST", dep, `{"amount":-5}`, nil, 400, "invalid", "positive"},
		{"amount zero", "POST", dep, `{"amount":0}`, nil, 400, "invalid", "positive"},
		{"amount above limit", "POST", dep, `{"amount":10000000001}`, nil, 400, "invalid", "at most 10000000000"},
		{"amount beyond int64", "POST", dep, `{"amount":99999999999999999999}`, nil, 400, "invalid", "at most"},
		{"amount missing", "POST", dep, `{}`, nil, 400, "invalid", "amount is required"},
		{"amount null", "POST", dep, `{"amount":null}`, nil, 400, "invalid", "amount is required"},
		{"amount bool", "POST", dep, `{"amount":true}`, nil, 400, "invalid", "JSON integer"},
		{"deposit unknown field", "POST", dep, `{"amount":100,"currency":"USD"}`, nil, 400, "invalid", "unknown field"},
		{"deposit unknown user", "POST", "/v1/users/999999/deposits", `{"amount":100}`, nil, 404, "not_found", "user 999999"},
		{"deposit bad wait", "POST", dep + "?wait=maybe", `{"amount":100}`, nil, 400, "invalid", "wait"},
		{"idempotency key too long", "POST", dep, `{"amount":100}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid", "Idempotency-Key"},
		{"idempotency key with space", "POST", dep, `{"amount":100}`, []string{"Idempotency-Key", "a b"}, 400, "invalid", "Idempotency-Key"},

		{"purchase no merchant", "POST", pur, `{"amount":100,"reference":"r"}`, nil, 400, "invalid", "merchant is required"},
		{"purchase no reference", "POST", pur, `{"amount":100,"merchant":"m"}`, nil, 400, "invalid", "reference is required"},
		{"purchase reference too long", "POST", pur, `{"amount":100,"merchant":"m","reference":"` + strings.Repeat("r", 101) + `"}`, nil, 400, "invalid", "at most 100"},

		{"transfer to oneself", "POST", "/v1/transfers", fmt.Sprintf(`{"from":%d,"to":%d,"amount":1}`, u, u), nil, 400, "invalid", "oneself"},
		{"transfer from string", "POST", "/v1/transfers", fmt.Sprintf(`{"from":"%d","to":%d,"amount":1}`, u, v), nil, 400, "invalid", "from must be a positive integer"},
		{"transfer from zero", "POST", "/v1/transfers", fmt.Sprintf(`{"from":0,"to":%d,"amount":1}`, v), nil, 400, "invalid", "from must be a positive integer"},
		{"transfer to missing", "POST", "/v1/transfers", fmt.Sprintf(`{"from":%d,"amount":1}`, u), nil, 400, "invalid", "to is required"},
		{"transfer to unknown", "POST", "/v1/transfers", fmt.Sprintf(`{"from":%d,"to":999999,"amount":1}`, u), nil, 404, "not_found", "user 999999"},
		{"transfer amount fraction", "POST", "/v1/transfers", fmt.Sprintf(`{"from":%d,"to":%d,"amount":0.5}`, u, v), nil, 400, "invalid", "minor units"},

		{"saga id not a number", "GET", "/v1/sagas/x", "", nil, 400, "invalid", "saga id"},
		{"saga unknown", "GET", "/v1/sagas/424242", "", nil, 404, "not_found", "saga 424242"},
		{"sagas bad state", "GET", "/v1/sagas?state=done", "", nil, 400, "invalid", "state must be one of"},
		{"sagas limit zero", "GET", "/v1/sagas?limit=0", "", nil, 400, "invalid", "limit"},
		{"sagas limit too big", "GET", "/v1/sagas?limit=101", "", nil, 400, "invalid", "limit"},
		{"sagas bad user", "GET", "/v1/sagas?user_id=-1", "", nil, 400, "invalid", "user_id"},
		{"sagas unknown user", "GET", "/v1/sagas?user_id=999999", "", nil, 404, "not_found", "user 999999"},
		{"sagas bad cursor", "GET", "/v1/sagas?cursor=abc", "", nil, 400, "invalid", "cursor"},
		{"no such route", "GET", "/v1/nothing", "", nil, 404, "not_found", "no such route"},
	}
	before := s.counts(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := s.do(t, c.method, c.path, c.body, c.headers...)
			require.Equal(t, c.status, res.status, res.raw)
			errBody, ok := res.body["error"].(map[string]any)
			require.True(t, ok, res.raw)
			require.Equal(t, c.code, errBody["code"], res.raw)
			require.Contains(t, errBody["message"], c.msg)
		})
	}
	require.Equal(t, before, s.counts(t), "bad requests changed the database")
}

func TestOperationsThroughHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, true)
	u, v := s.createUser(t), s.createUser(t)

	// Deposit, waited for: 200, completed, Location, steps.
	res := s.do(t, "POST", fmt.Sprintf("/v1/users/%d/deposits?wait=true", u), `{"amount":10000}`, "Idempotency-Key", "top-up-1")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "completed", res.body["state"])
	require.Equal(t, "deposit", res.body["kind"])
	require.Equal(t, float64(10000), res.body["amount"])
	require.Nil(t, res.body["error"])
	dep := int64(res.body["id"].(float64))
	require.Equal(t, fmt.Sprintf("/v1/sagas/%d", dep), res.header.Get("Location"))
	steps := res.body["steps"].([]any)
	require.Len(t, steps, 2)
	require.Equal(t, map[string]any{"name": "charge", "phase": "forward", "status": "done", "attempts": float64(1), "error": nil}, steps[0])

	// Replay: same key and body → the same saga; other body → 422.
	res = s.do(t, "POST", fmt.Sprintf("/v1/users/%d/deposits", u), `{"amount":10000}`, "Idempotency-Key", "top-up-1")
	require.Equal(t, http.StatusAccepted, res.status, res.raw)
	require.Equal(t, float64(dep), res.body["id"])
	require.Equal(t, "true", res.header.Get("Idempotent-Replayed"))
	before := s.counts(t)
	res = s.do(t, "POST", fmt.Sprintf("/v1/users/%d/deposits", u), `{"amount":10001}`, "Idempotency-Key", "top-up-1")
	require.Equal(t, http.StatusUnprocessableEntity, res.status, res.raw)
	require.Equal(t, "unprocessable", res.body["error"].(map[string]any)["code"])
	require.Equal(t, before, s.counts(t))

	// Purchase without wait: 202 and a Location to poll.
	res = s.do(t, "POST", fmt.Sprintf("/v1/users/%d/purchases", u), `{"amount":5000,"merchant":"coffee","reference":"reject-1"}`)
	require.Equal(t, http.StatusAccepted, res.status, res.raw)
	loc := res.header.Get("Location")
	require.NotEmpty(t, loc)
	pur := int64(res.body["id"].(float64))

	// The rejected purchase ends compensated with its reason.
	deadline := time.Now().Add(20 * time.Second)
	for {
		res = s.do(t, "GET", loc, "")
		require.Equal(t, http.StatusOK, res.status)
		if res.body["state"] != "running" && res.body["state"] != "compensating" {
			break
		}
		require.True(t, time.Now().Before(deadline), "purchase still %v", res.body["state"])
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "compensated", res.body["state"], res.raw)
	require.Equal(t, "rejected", res.body["error"].(map[string]any)["code"])

	// Transfer, waited for.
	res = s.do(t, "POST", "/v1/transfers?wait=true", fmt.Sprintf(`{"from":%d,"to":%d,"amount":2500}`, u, v))
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "completed", res.body["state"])
	require.Equal(t, float64(v), res.body["counterparty_id"])

	res = s.do(t, "GET", fmt.Sprintf("/v1/users/%d/wallet", u), "")
	require.Equal(t, map[string]any{"user_id": float64(u), "balance": float64(7500), "currency": "CNY", "last_seq": float64(4)}, res.body)

	res = s.do(t, "GET", fmt.Sprintf("/v1/users/%d/events", u), "")
	require.Equal(t, http.StatusOK, res.status)
	var kinds []string
	for i, it := range res.body["items"].([]any) {
		m := it.(map[string]any)
		require.Equal(t, float64(i+1), m["seq"])
		require.Contains(t, m, "published")
		kinds = append(kinds, m["kind"].(string))
	}
	require.Equal(t, []string{"deposit", "purchase", "refund", "transfer_out"}, kinds)

	// Listing: the user's sagas newest first, filtered, paginated.
	res = s.do(t, "GET", fmt.Sprintf("/v1/sagas?user_id=%d&state=compensated", u), "")
	require.Equal(t, http.StatusOK, res.status)
	items := res.body["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, float64(pur), items[0].(map[string]any)["id"])

	res = s.do(t, "GET", fmt.Sprintf("/v1/sagas?user_id=%d&limit=2", u), "")
	require.Len(t, res.body["items"].([]any), 2)
	cursor, ok := res.body["next_cursor"].(string)
	require.True(t, ok, res.raw)
	res = s.do(t, "GET", fmt.Sprintf("/v1/sagas?user_id=%d&limit=2&cursor=%s", u, cursor), "")
	require.Len(t, res.body["items"].([]any), 1)
	require.Equal(t, float64(dep), res.body["items"].([]any)[0].(map[string]any)["id"])
	require.NotContains(t, res.body, "next_cursor")

	// The payee sees the transfer too.
	res = s.do(t, "GET", fmt.Sprintf("/v1/sagas?user_id=%d", v), "")
	require.Len(t, res.body["items"].([]any), 1)
}
