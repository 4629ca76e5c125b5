package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/badinput"
	"github.com/walletsaga/walletsaga/internal/testutil/simtest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

const (
	serviceToken = "test-service-token-0123"
	// aliceToken and bobToken are the tokens of the operators alice and bob@ops.
	aliceToken = "test-alice-token-0123456"
	bobToken   = "test-bob-token-0123456789"
)

// operators are walletsvc's operators in these tests, as OPERATOR_TOKENS lists them.
var operators = func() httpx.Operators {
	ops, err := httpx.ParseOperators(httpx.OperatorEntry("alice", aliceToken) + "\n" + httpx.OperatorEntry("bob@ops", bobToken))
	if err != nil {
		panic(err)
	}
	return ops
}()

type server struct {
	url  string
	pool *pgxpool.Pool
	ctx  context.Context
	echo *echo.Echo
	prov *simtest.Provider // the gateway and merchant the sagas call
}

// newServer serves the wallet API on a database of its own; requests run their sagas inline
// (or in the background without ?wait=true), and runSagas also runs recovery.
func newServer(t *testing.T, runSagas bool) *server {
	t.Helper()
	return newServerWith(t, runSagas, httpapi.Options{ServiceToken: serviceToken, Operators: operators})
}

// newServerWith is newServer with opts (its logger is set here).
func newServerWith(t *testing.T, runSagas bool, opts httpapi.Options) *server {
	t.Helper()
	pool, _ := testdb.New(t)
	return newServerOn(t, pool, runSagas, opts)
}

// newServerOn is newServerWith on a database the caller already has.
func newServerOn(t *testing.T, pool *pgxpool.Pool, runSagas bool, opts httpapi.Options) *server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := saga.New(pool, saga.Options{PollInterval: 200 * time.Millisecond, Logger: log})
	prov := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(pool, eng, prov.Gateway, prov.Merchant,
		wallet.Options{Logger: log, Steps: wallet.StepTuning{BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}})
	require.NoError(t, err)
	e := httpx.New(httpx.Options{Logger: log})
	opts.Logger = log
	httpapi.Register(e, svc, opts)
	ts := httptest.NewServer(e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if runSagas {
		require.NoError(t, eng.Recovery().Start(ctx))
	}
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, eng.Recovery().Stop(context.Background()))
		cancel()
	})
	return &server{url: ts.URL, pool: pool, ctx: ctx, echo: e, prov: prov}
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

// Names, merchants and references take whatever a person writes — the ideographic space,
// NBSP, emoji joined by ZWJ, right-to-left script, SQL-looking text — and give it back
// verbatim.
func TestFreeTextIsTakenVerbatim(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	for i, name := range []string{"山田\u3000太郎", "José\u00a0María", "👨\u200d👩\u200d👧\u200d👦 Family", "محمد بن سلمان", "Robert'); DROP TABLE users;--"} {
		body, err := json.Marshal(map[string]string{"name": name, "phone": fmt.Sprintf("+861380013800%d", i)})
		require.NoError(t, err)
		res := s.do(t, http.MethodPost, "/v1/users", string(body))
		require.Equal(t, http.StatusCreated, res.status, res.raw)
		require.Equal(t, name, res.body["name"])
	}
	u := s.createUser(t)
	res := s.do(t, http.MethodPost, fmt.Sprintf("/v1/users/%d/deposits?wait=true", u), `{"amount":1000,"source":"カード\u3000１"}`)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "カード\u3000１", res.body["source"])
	res = s.do(t, http.MethodPost, fmt.Sprintf("/v1/users/%d/purchases?wait=true", u), `{"amount":100,"merchant":"Café\u00a0«Zürich» ☕","reference":"🧾\u200d#1"}`)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "Café\u00a0«Zürich» ☕", res.body["merchant"])
}

// Every request of the bad-input corpus answers a 4xx JSON error with a precise message and
// changes nothing. e2e replays the same corpus against the walletsvc binary.
func TestBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	u := s.createUser(t)
	v := s.createUser(t)
	attention, err := strconv.ParseInt(s.needsAttention(t, u), 10, 64)
	require.NoError(t, err)
	cases := badinput.Cases(badinput.Fixture{User: u, Other: v, Operator: "alice", OperatorToken: aliceToken, NeedsAttention: attention})
	before := badinput.Fingerprint(t, s.ctx, s.pool)
	badinput.Run(t, http.DefaultClient, s.url, serviceToken, cases)
	require.Equal(t, before, badinput.Fingerprint(t, s.ctx, s.pool), "bad requests changed the database")
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
	require.Regexp(t, fmt.Sprintf(`^%d-[0-9a-f]{32}$`, dep), res.body["provider_key_prefix"], "what to ask the gateway about")

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
	wait.Until(t, 20*time.Second, "the purchase to end", func() bool {
		res = s.do(t, "GET", loc, "")
		require.Equal(t, http.StatusOK, res.status)
		return res.body["state"] != "running" && res.body["state"] != "compensating"
	})
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

// Withdrawals through HTTP, with the semantics of deposits: ?wait=true answers 200 once the
// saga ended, without it 202 and Location at once; the Idempotency-Key replays the same saga
// and refuses another body with 422. A refused payout is refunded, as its own event.
func TestWithdrawalsThroughHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t, true)
	u := s.createUser(t)
	res := s.do(t, "POST", fmt.Sprintf("/v1/users/%d/deposits?wait=true", u), `{"amount":10000}`)
	require.Equal(t, http.StatusOK, res.status, res.raw)

	path := fmt.Sprintf("/v1/users/%d/withdrawals", u)
	res = s.do(t, "POST", path+"?wait=true", `{"amount":3000,"destination":"ICBC 6222 0200 \u00a0 1234"}`, "Idempotency-Key", "wd-1")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "withdrawal", res.body["kind"])
	require.Equal(t, "completed", res.body["state"])
	require.Equal(t, "ICBC 6222 0200 \u00a0 1234", res.body["destination"])
	require.Equal(t, float64(3000), res.body["amount"])
	wd := int64(res.body["id"].(float64))
	require.Equal(t, fmt.Sprintf("/v1/sagas/%d", wd), res.header.Get("Location"))
	steps := res.body["steps"].([]any)
	require.Len(t, steps, 2)
	require.Equal(t, map[string]any{"name": "payout", "phase": "forward", "status": "done", "attempts": float64(1), "error": nil}, steps[1])

	res = s.do(t, "POST", path+"?wait=true", `{"amount":3000,"destination":"ICBC 6222 0200 \u00a0 1234"}`, "Idempotency-Key", "wd-1")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, float64(wd), res.body["id"], "the same saga")
	require.Equal(t, "true", res.header.Get("Idempotent-Replayed"))
	res = s.do(t, "POST", path, `{"amount":3001,"destination":"ICBC 6222 0200 \u00a0 1234"}`, "Idempotency-Key", "wd-1")
	require.Equal(t, http.StatusUnprocessableEntity, res.status, res.raw)

	// Not waited for: 202 and Location at once; the refused payout ends compensated.
	res = s.do(t, "POST", path, `{"amount":2000,"destination":"reject-closed"}`, "Idempotency-Key", "wd-2")
	require.Equal(t, http.StatusAccepted, res.status, res.raw)
	loc := res.header.Get("Location")
	require.Regexp(t, `^/v1/sagas/[1-9][0-9]*$`, loc)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res = s.do(t, "GET", loc, "")
		require.Equal(t, http.StatusOK, res.status)
		if res.body["state"] != "running" && res.body["state"] != "compensating" {
			break
		}
		require.True(t, time.Now().Before(deadline), "withdrawal still %v", res.body["state"])
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "compensated", res.body["state"], res.raw)
	require.Equal(t, "rejected", res.body["error"].(map[string]any)["code"])

	res = s.do(t, "GET", fmt.Sprintf("/v1/users/%d/events", u), "")
	require.Equal(t, http.StatusOK, res.status)
	var kinds []string
	for _, it := range res.body["items"].([]any) {
		kinds = append(kinds, it.(map[string]any)["kind"].(string))
	}
	require.Equal(t, []string{"deposit", "withdrawal", "withdrawal", "withdrawal_refund"}, kinds)
	res = s.do(t, "GET", fmt.Sprintf("/v1/users/%d/wallet", u), "")
	require.Equal(t, float64(7000), res.body["balance"])
}

// The bad-input corpus sends bad requests to every route that takes input: a route added
// without its cases fails here. (Only GET /openapi.yaml takes none.)
func TestTheBadInputCorpusCoversEveryRoute(t *testing.T) {
	t.Parallel()
	// Never connected: the routes are only listed.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov := simtest.Start(t, nil, providersim.Options{})
	svc, err := wallet.NewService(pool, saga.New(pool, saga.Options{Logger: log}), prov.Gateway, prov.Merchant, wallet.Options{Logger: log})
	require.NoError(t, err)
	e := httpx.New(httpx.Options{Logger: log})
	httpapi.Register(e, svc, httpapi.Options{ServiceToken: serviceToken, Operators: operators, Logger: log})
	cases := badinput.Cases(badinput.Fixture{User: 1, Other: 2, Operator: "alice", OperatorToken: aliceToken, NeedsAttention: 3})
	param := regexp.MustCompile(`:[a-z_]+`)
	for _, r := range e.Routes() {
		if r.Path == "/openapi.yaml" {
			continue
		}
		re := regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(r.Path), `[^/]+`) + `(\?.*)?$`)
		n := 0
		for _, c := range cases {
			if c.Method == r.Method && re.MatchString(c.Path) {
				n++
			}
		}
		require.Positivef(t, n, "no bad-input case for %s %s (internal/wallet/httpapi/badinput)", r.Method, r.Path)
	}
}
