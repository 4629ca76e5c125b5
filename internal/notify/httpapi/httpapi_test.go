package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	readToken = "s3cret-read-token-0123"
	// testerToken and carolToken are the tokens of the operators tester and carol.
	testerToken = "s3cret-tester-token-0123"
	carolToken  = "s3cret-carol-token-0123"
)

// operators are the notifier's operators in these tests, as OPERATOR_TOKENS lists them.
var operators = func() httpx.Operators {
	ops, err := httpx.ParseOperators(httpx.OperatorEntry("tester", testerToken) + "\n" + httpx.OperatorEntry("carol", carolToken))
	if err != nil {
		panic(err)
	}
	return ops
}()

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	pool *pgxpool.Pool
	srv  *httptest.Server
	out  *bytes.Buffer
}

// newEnv serves the notifier API on a database of its own, seeded with user 1: seq 1 sent,
// seq 2 dead-lettered, seq 3 sent; and user 2: seq 1 sent. wrap, when set, wraps the echo
// handler (the page test uses it to add an SMS while the page is open).
func newEnv(t *testing.T, wrap func(echo.HandlerFunc) echo.HandlerFunc) *env {
	t.Helper()
	return newEnvOf(t, wrap, nil)
}

// newEnvWith is newEnv with the gate's view changed by edit before it serves.
func newEnvWith(t *testing.T, edit func(*httpapi.Gate)) *env {
	t.Helper()
	return newEnvOf(t, nil, edit)
}

func newEnvOf(t *testing.T, wrap func(echo.HandlerFunc) echo.HandlerFunc, edit func(*httpapi.Gate)) *env {
	t.Helper()
	pool, _ := testdb.New(t)
	notifytest.Seed(t, pool,
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 10000), Status: gate.StatusSent, Attempts: 1,
			Text: "You topped up 100.00 CNY. Balance: 100.00 CNY.", FinishedAt: t0.Add(time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 2, walletevent.Purchase, -404), Status: gate.StatusDeadLettered, Attempts: 5,
			LastError: "simulated failure: amount -404", FinishedAt: t0.Add(2 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 3, walletevent.Purchase, -5000), Status: gate.StatusSent, Attempts: 1,
			Text: "You paid 50.00 CNY for a purchase. Balance: 50.00 CNY.", FinishedAt: t0.Add(3 * time.Second)},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.TransferIn, 2000), Status: gate.StatusSent, Attempts: 1,
			FinishedAt: t0.Add(4 * time.Second)},
	)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := httpx.New(httpx.Options{Logger: log})
	if wrap != nil {
		e.Use(wrap)
	}
	out := &bytes.Buffer{}
	g, bad := gate.NewStore(pool), inbox.NewStore(pool)
	sender := senders.NewLogSender(out)
	lanes, err := gate.NewLanes(g, gate.LaneConfig{Owner: "httpapi-test", Policy: gate.DefaultRetryPolicy, Sender: sender, Logger: log})
	require.NoError(t, err)
	view := &httpapi.Gate{Store: g, Lanes: lanes, Inbox: inbox.NewInbox(bad, g, nil, log),
		DLQBacklog: deadletters.NewPublisher(g, bad, nil, 0, log).Backlog, GapAlertAfter: 5 * time.Minute}
	if edit != nil {
		edit(view)
	}
	httpapi.Register(e, httpapi.Deps{Log: smslog.NewStore(pool), Operator: deadletters.NewOperator(pool, g, sender), Gate: view,
		Operators: operators, ReadToken: readToken, Logger: log})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &env{pool: pool, srv: srv, out: out}
}

// do sends a request with the Authorization auth. A GET without auth sends the read token;
// auth "-" sends no Authorization header at all.
func (e *env) do(t *testing.T, method, path, auth, body string) (int, map[string]any) {
	t.Helper()
	return e.doAs(t, method, path, auth, "", body)
}

// doAs is do with an X-Operator header naming operator (none when empty).
func (e *env) doAs(t *testing.T, method, path, auth, operator, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case auth == "-":
	case auth != "":
		req.Header.Set("Authorization", auth)
	case method == http.MethodGet:
		req.Header.Set("Authorization", "Bearer "+readToken)
	}
	if operator != "" {
		req.Header.Set(httpx.OperatorHeader, operator)
	}
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var v map[string]any
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &v), "body %s", b)
	return resp.StatusCode, v
}

func errCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestUserSMS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	st, v := e.do(t, http.MethodGet, "/v1/users/1/sms", "", "")
	require.Equal(t, http.StatusOK, st)
	items := v["items"].([]any)
	require.Len(t, items, 3)
	var seqs []float64
	for _, it := range items {
		seqs = append(seqs, it.(map[string]any)["seq"].(float64))
	}
	require.Equal(t, []float64{1, 2, 3}, seqs)
	dead := items[1].(map[string]any)
	require.Equal(t, "dead_lettered", dead["status"])
	require.Nil(t, dead["sent_at"])
	require.Equal(t, "You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.", dead["text"])
	first := items[0].(map[string]any)
	require.Equal(t, "2026-03-01T12:00:01Z", first["sent_at"])
	require.Equal(t, "deposit", first["kind"])

	st, v = e.do(t, http.MethodGet, "/v1/users/abc/sms", "", "")
	require.Equal(t, http.StatusBadRequest, st)
	require.Equal(t, "invalid", errCode(v))

	st, v = e.do(t, http.MethodGet, "/v1/users/77/sms", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, []any{}, v["items"])
}

func TestListsAndPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	st, v := e.do(t, http.MethodGet, "/v1/users?limit=1", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Len(t, v["items"], 1)
	u := v["items"].([]any)[0].(map[string]any)
	require.Equal(t, 1.0, u["user_id"])
	require.Equal(t, 2.0, u["sent"])
	require.Equal(t, 1.0, u["dead_lettered"])
	st, v = e.do(t, http.MethodGet, "/v1/users?limit=1&cursor="+v["next_cursor"].(string), "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, 2.0, v["items"].([]any)[0].(map[string]any)["user_id"])
	require.Nil(t, v["next_cursor"])

	st, v = e.do(t, http.MethodGet, "/v1/dead-letters", "", "")
	require.Equal(t, http.StatusOK, st)
	dl := v["items"].([]any)
	require.Len(t, dl, 1)
	d := dl[0].(map[string]any)
	require.Equal(t, 1.0, d["user_id"])
	require.Equal(t, 2.0, d["seq"])
	require.Equal(t, 5.0, d["attempts"])
	require.Equal(t, "simulated failure: amount -404", d["last_error"])
	require.Equal(t, "2026-03-01T12:00:02Z", d["dead_lettered_at"])

	st, v = e.do(t, http.MethodGet, "/v1/bad-messages", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, []any{}, v["items"])

	st, v = e.do(t, http.MethodGet, "/v1/sms", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Len(t, v["items"], 4)
	require.Equal(t, "", v["next_cursor"], "rows younger than the feed lag keep the cursor where it was")

	// The recent activity: newest first, a page at a time.
	st, v = e.do(t, http.MethodGet, "/v1/activity?limit=3", "", "")
	require.Equal(t, http.StatusOK, st)
	act := v["items"].([]any)
	require.Len(t, act, 3)
	require.Equal(t, []any{2.0, 1.0}, []any{act[0].(map[string]any)["user_id"], act[0].(map[string]any)["seq"]}, "the latest change first")
	st, v = e.do(t, http.MethodGet, "/v1/activity?limit=3&cursor="+v["next_cursor"].(string), "", "")
	require.Equal(t, http.StatusOK, st)
	require.Len(t, v["items"], 1)
	require.Nil(t, v["next_cursor"])

	// A user's SMS, a page at a time; the search by phone.
	st, v = e.do(t, http.MethodGet, "/v1/users/1/sms?limit=2", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Len(t, v["items"], 2)
	st, v = e.do(t, http.MethodGet, "/v1/users/1/sms?limit=2&cursor="+v["next_cursor"].(string), "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, 3.0, v["items"].([]any)[0].(map[string]any)["seq"])
	st, v = e.do(t, http.MethodGet, "/v1/users?phone=%2B8613800001234", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Len(t, v["items"], 2, "both users' events went to the number")
	st, v = e.do(t, http.MethodGet, "/v1/users?phone=%2B8613800009999", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, []any{}, v["items"])
	for _, q := range []string{"phone=", "phone=13800001234", "phone=%2B86-138", "phone=13912345678"} {
		st, v = e.do(t, http.MethodGet, "/v1/users?"+q, "", "")
		require.Equal(t, http.StatusBadRequest, st, q)
		require.Equal(t, "invalid", errCode(v))
		require.NotContains(t, fmt.Sprint(v), "3912345", "the message, which the access log records, masks the number")
	}

	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "limit=1001", "limit=100000", "cursor=%25%25", "cursor=not-a-cursor"} {
		for _, p := range []string{"/v1/users", "/v1/users/1/sms", "/v1/activity", "/v1/dead-letters", "/v1/bad-messages", "/v1/sms", "/v1/audit"} {
			st, v = e.do(t, http.MethodGet, p+"?"+q, "", "")
			require.Equal(t, http.StatusBadRequest, st, "%s?%s", p, q)
			require.Equal(t, "invalid", errCode(v))
		}
	}
}

func TestReplayEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const path = "/v1/dead-letters/1/2/replay"

	st, v := e.do(t, http.MethodPost, path, "", "")
	require.Equal(t, http.StatusUnauthorized, st)
	require.Equal(t, "unauthorized", errCode(v))
	st, _ = e.do(t, http.MethodPost, path, "Basic YWRtaW46eA==", "")
	require.Equal(t, http.StatusUnauthorized, st)
	st, v = e.do(t, http.MethodPost, path, "Bearer wrong", "")
	require.Equal(t, http.StatusForbidden, st)
	require.Equal(t, "forbidden", errCode(v))

	auth := "Bearer " + testerToken
	st, v = e.do(t, http.MethodPost, path, auth, `{"reason":"provider outage"}`)
	require.Equal(t, http.StatusOK, st, "%v", v)
	var dep string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&dep))
	require.Equal(t, notify.ProviderKey(dep, 1, 2, notifytest.Epoch), v["idempotency_key"], "a replay keeps the SMS's key")
	require.Equal(t, false, v["already_delivered"])
	require.Equal(t, "(Delayed) You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.", v["text"])
	require.Contains(t, e.out.String(), "late=true")

	st, v = e.do(t, http.MethodPost, path, auth, "")
	require.Equal(t, http.StatusUnsupportedMediaType, st, "a body with a reason is required: %v", v)
	st, v = e.do(t, http.MethodPost, path, auth, `{"reason":" "}`)
	require.Equal(t, http.StatusBadRequest, st, "the reason is required: %v", v)
	st, v = e.doAs(t, http.MethodPost, path, auth, "carol", `{"reason":"again"}`)
	require.Equal(t, http.StatusBadRequest, st, "tester's token cannot act as carol: %v", v)
	st, v = e.doAs(t, http.MethodPost, path, "Bearer "+carolToken, "carol", `{"reason":"again"}`)
	require.Equal(t, http.StatusOK, st, "%v", v)
	require.Equal(t, 2.0, v["replay"])
	require.Equal(t, true, v["already_delivered"], "the second replay finds it delivered")
	require.Equal(t, 1, strings.Count(e.out.String(), "late=true"), "and sends nothing")

	rows, err := e.pool.Query(context.Background(), `SELECT actor || ': ' || reason FROM notify.audit WHERE action = 'replay_dead_letter' ORDER BY id`)
	require.NoError(t, err)
	audited, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"tester: provider outage", "carol: again"}, audited, "each replay by the operator whose token it bore")

	st, v = e.do(t, http.MethodPost, "/v1/dead-letters/1/9/replay", auth, `{"reason":"r"}`)
	require.Equal(t, http.StatusNotFound, st)
	require.Equal(t, "not_found", errCode(v))
	st, v = e.do(t, http.MethodPost, "/v1/dead-letters/1/1/replay", auth, `{"reason":"r"}`)
	require.Equal(t, http.StatusConflict, st)
	require.Equal(t, "conflict", errCode(v))
	st, _ = e.do(t, http.MethodPost, "/v1/dead-letters/1/x/replay", auth, `{"reason":"r"}`)
	require.Equal(t, http.StatusBadRequest, st)
	st, _ = e.do(t, http.MethodPost, path, auth, `{"reason":"x","extra":1}`)
	require.Equal(t, http.StatusBadRequest, st)
	st, _ = e.do(t, http.MethodPost, path, auth, `{"reason":"`+strings.Repeat("x", 501)+`"}`)
	require.Equal(t, http.StatusBadRequest, st)

	st, v = e.do(t, http.MethodGet, "/v1/users/1/sms", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, 2.0, v["items"].([]any)[1].(map[string]any)["replay_count"])
}

func TestReplayDisabledWithoutToken(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	httpapi.Register(e, httpapi.Deps{Log: smslog.NewStore(pool), Operator: deadletters.NewOperator(pool, gate.NewStore(pool), senders.NewLogSender(nil))})
	req := httptest.NewRequest(http.MethodPost, "/v1/dead-letters/1/2/replay", nil)
	req.Header.Set("Authorization", "Bearer ")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "operator endpoints are disabled: no operator is configured")
}

// The read endpoints take the read token or an operator's token, and nothing else; with
// neither configured they are disabled. The page, its assets, and the document stay open.
func TestReadEndpointsNeedTheReadOrAnOperatorsToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, path := range []string{"/v1/users", "/v1/users/1/sms", "/v1/sms", "/v1/activity", "/v1/dead-letters", "/v1/bad-messages", "/v1/audit", "/v1/gate"} {
		st, v := e.do(t, http.MethodGet, path, "-", "")
		require.Equal(t, http.StatusUnauthorized, st, path)
		require.Contains(t, v["error"].(map[string]any)["message"], "a read token is required", path)
		st, v = e.do(t, http.MethodGet, path, "Bearer not-the-read-token", "")
		require.Equal(t, http.StatusForbidden, st, path)
		require.Equal(t, "forbidden", errCode(v), path)
		st, _ = e.do(t, http.MethodGet, path, "Bearer "+carolToken, "")
		require.Equal(t, http.StatusOK, st, "%s with an operator's token", path)
		st, _ = e.do(t, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, st, "%s with the read token", path)
	}
	for _, path := range []string{"/", "/assets/app.js", "/openapi.yaml"} {
		resp, err := e.srv.Client().Get(e.srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s is open", path)
	}

	pool, _ := testdb.New(t)
	off := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	httpapi.Register(off, httpapi.Deps{Log: smslog.NewStore(pool), Operator: deadletters.NewOperator(pool, gate.NewStore(pool), senders.NewLogSender(nil))})
	req := httptest.NewRequest(http.MethodGet, "/v1/users/1/sms", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "no READ_TOKEN (nor OPERATOR_TOKENS) configured")
}

func TestPageIsSelfContained(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, p := range []struct{ path, ctype string }{
		{"/", "text/html"}, {"/assets/app.js", "javascript"}, {"/assets/style.css", "text/css"},
	} {
		resp, err := e.srv.Client().Get(e.srv.URL + p.path)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, p.path)
		require.Contains(t, resp.Header.Get("Content-Type"), p.ctype, p.path)
		require.NotContains(t, string(b), "http://", "%s loads nothing from elsewhere", p.path)
		require.NotContains(t, string(b), "https://", "%s loads nothing from elsewhere", p.path)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), "%s may not be framed", p.path)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", p.path)
	}
}

// TestTheGateViewIsReadOnceForManyRequests: GET /v1/gate counts whole tables, so concurrent
// requests share one reading, and requests within Fresh of it share it too; an operator's
// skip here is seen by the next request at once.
func TestTheGateViewIsReadOnceForManyRequests(t *testing.T) {
	t.Parallel()
	var readings atomic.Int64
	e := newEnvWith(t, func(g *httpapi.Gate) {
		backlog := g.DLQBacklog
		g.DLQBacklog = func(ctx context.Context) (int64, error) { readings.Add(1); return backlog(ctx) }
		g.Fresh = time.Hour
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			st, _ := e.do(t, http.MethodGet, "/v1/gate", "", "")
			require.Equal(t, http.StatusOK, st)
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, readings.Load(), "20 requests, one reading")
	st, _ := e.do(t, http.MethodGet, "/v1/gate", "", "")
	require.Equal(t, http.StatusOK, st)
	require.EqualValues(t, 1, readings.Load(), "a request within Fresh shares it")
}
