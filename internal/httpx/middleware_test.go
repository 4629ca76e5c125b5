package httpx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/reqid"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newTestServer(t *testing.T) (*httptest.Server, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	// As cli.Logger builds it for the binaries.
	log := slog.New(reqid.Handler(slog.NewJSONHandler(logs, nil)))
	e := httpx.New(httpx.Options{Logger: log, Timeout: 200 * time.Millisecond})
	e.GET("/panic", func(echo.Context) error { panic("boom") })
	e.POST("/echo", func(c echo.Context) error {
		var v map[string]any
		if err := httpx.DecodeJSON(c, &v); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, v)
	})
	e.GET("/slow", func(c echo.Context) error {
		<-c.Request().Context().Done()
		return c.Request().Context().Err()
	})
	e.GET("/hello", func(c echo.Context) error {
		log.InfoContext(c.Request().Context(), "handler says hello")
		return c.String(http.StatusOK, "hi")
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, logs
}

func errorBody(t *testing.T, resp *http.Response) (code string) {
	t.Helper()
	require.Equal(t, "application/json", strings.Split(resp.Header.Get("Content-Type"), ";")[0])
	var b struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&b))
	require.NotEmpty(t, b.Error.Message)
	return b.Error.Code
}

func TestPanicIsA500AndTheServerSurvives(t *testing.T) {
	t.Parallel()
	srv, logs := newTestServer(t)
	for range 2 {
		resp, err := http.Get(srv.URL + "/panic")
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.Equal(t, "internal", errorBody(t, resp))
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/hello")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "still serving after panics")
	require.Contains(t, logs.String(), "panic in handler")
	require.NotContains(t, logs.String(), `"boom"}`+"\n"+`{"error"`, "the panic is not sent to the client")
}

func TestOversizedBodyIsA413(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	body := `{"x":"` + strings.Repeat("a", 1<<20) + `"}`
	resp, err := http.Post(srv.URL+"/echo", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Equal(t, "too_large", errorBody(t, resp))

	resp2, err := http.Post(srv.URL+"/echo", "application/json", strings.NewReader(`{"x":"small"}`))
	require.NoError(t, err)
	defer resp2.Body.Close()
	require.Equal(t, http.StatusOK, resp2.StatusCode)
}

func TestSlowHandlerTimesOutAsA503(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	start := time.Now()
	resp, err := http.Get(srv.URL + "/slow")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "unavailable", errorBody(t, resp))
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestRequestIDIsEchoedAndLogged(t *testing.T) {
	t.Parallel()
	srv, logs := newTestServer(t)
	resp, err := http.Get(srv.URL + "/hello")
	require.NoError(t, err)
	resp.Body.Close()
	id := resp.Header.Get(echo.HeaderXRequestID)
	require.Len(t, id, 32, "a fresh id")

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
	req.Header.Set(echo.HeaderXRequestID, "caller-id-42")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "caller-id-42", resp.Header.Get(echo.HeaderXRequestID), "a caller's id is kept")

	req.Header.Set(echo.HeaderXRequestID, strings.Repeat("x", 200))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, resp.Header.Get(echo.HeaderXRequestID), 32, "an overlong id is replaced")

	var handlerLines, accessLines int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["request_id"] == "caller-id-42" {
			switch rec["msg"] {
			case "handler says hello":
				handlerLines++
			case "http":
				accessLines++
			}
		}
	}
	require.Equal(t, 1, handlerLines, "the handler's own line carries the id:\n%s", logs.String())
	require.Equal(t, 1, accessLines, "the access log line carries the id:\n%s", logs.String())
}

// The access log masks a phone number in the URI, query string included (the SMS console's
// search by phone), however it is encoded, and keeps the rest.
func TestTheAccessLogMasksPhoneNumbers(t *testing.T) {
	t.Parallel()
	srv, logs := newTestServer(t)
	for _, q := range []string{"phone=%2B8613812345678&limit=20", "limit=20&phone=%2B86%20138%201234%205678", "mobile=13812345678"} {
		resp, err := http.Get(srv.URL + "/hello?" + q)
		require.NoError(t, err)
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/v1/users/%2B8613812345678/sms")
	require.NoError(t, err)
	resp.Body.Close()
	var uris []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] == "http" {
			uris = append(uris, rec["uri"].(string))
		}
	}
	require.Equal(t, []string{
		"/hello?phone=+*********5678&limit=20",
		"/hello?limit=20&phone=+** *** **** 5678",
		"/hello?mobile=*******5678",
		"/v1/users/+*********5678/sms",
	}, uris)
	for _, digits := range []string{"381234", "138 1234", "138%201234"} {
		require.NotContains(t, logs.String(), digits)
	}
}

// An operator's reason is required, free text of at most MaxReasonLen characters.
func TestOperatorReasonIsCheckedFreeText(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, httpx.CheckReason(""), "reason is required")
	require.ErrorContains(t, httpx.CheckReason(strings.Repeat("x", httpx.MaxReasonLen+1)), "at most 500 characters")
	for bad, msg := range map[string]string{
		"a\x00b": "U+0000", "two\nlines": "U+000A", "tab\there": "U+0009", "lone \uFFFD": "valid UTF-8",
		" lost in broker failover ": "must not start or end with spaces", "  ": "must not start or end with spaces",
	} {
		require.ErrorContains(t, httpx.CheckReason(bad), msg, "%q", bad)
	}
	for _, good := range []string{"服务商故障已恢复 INC-12", "回滚\u3000完成", "👩\u200d💻 fixed it", strings.Repeat("é", httpx.MaxReasonLen)} {
		require.NoError(t, httpx.CheckReason(good), "%q", good)
	}
}

func TestDigitsTakesOnlyPlainDecimalIntegers(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "7": 7, "007": 7, "9223372036854775807": math.MaxInt64} {
		n, ok := httpx.Digits(s)
		require.True(t, ok, s)
		require.Equal(t, want, n, s)
	}
	for _, s := range []string{"", "+5", "-5", " 5", "5 ", "0x10", "1e3", "1_000", "9223372036854775808", "５"} {
		_, ok := httpx.Digits(s)
		require.False(t, ok, "%q", s)
	}
}

// A method the path does not have is a 405 naming the path's methods in Allow, as a JSON
// error; a path that does not exist stays a 404.
func TestUndeclaredMethodIsA405WithAllow(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodTrace, http.MethodHead, "FROB"} {
		req, err := http.NewRequest(method, srv.URL+"/echo", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		require.Contains(t, resp.Header.Get("Allow"), http.MethodPost, method)
		if method != http.MethodHead {
			require.Equal(t, "method_not_allowed", errorBody(t, resp), method)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/nowhere")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "not_found", errorBody(t, resp))
}

// RequireBearer takes any of its tokens; none configured disables the routes (403); a
// missing header is a 401 whose message names the realm with the right article.
func TestBearerTakesAnyOfItsTokens(t *testing.T) {
	t.Parallel()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ok := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	e.GET("/read", ok, httpx.RequireBearer("read", "reads are disabled", "read-token-0123456789", "", "other-token-0123456789"))
	e.GET("/metrics", ok, httpx.RequireBearer("metrics", "metrics are disabled", "metrics-token-0123456789"))
	e.GET("/off", ok, httpx.RequireBearer("read", "reads are disabled: no token is configured", "", ""))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	do := func(path, auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, auth string
		status     int
		msg        string
	}{
		{"/read", "Bearer read-token-0123456789", http.StatusNoContent, ""},
		{"/read", "bearer other-token-0123456789", http.StatusNoContent, ""},
		{"/read", "Bearer read-token-01234567890", http.StatusForbidden, "the read token is not valid"},
		{"/read", "", http.StatusUnauthorized, "a read token is required"},
		{"/read", "Basic read-token-0123456789", http.StatusUnauthorized, "a read token is required"},
		{"/metrics", "", http.StatusUnauthorized, "a metrics token is required"},
		{"/metrics", "Bearer read-token-0123456789", http.StatusForbidden, "the metrics token is not valid"},
		{"/off", "Bearer anything-at-all-here", http.StatusForbidden, "reads are disabled: no token is configured"},
	} {
		status, body := do(c.path, c.auth)
		require.Equal(t, c.status, status, "%s %q: %s", c.path, c.auth, body)
		require.Contains(t, body, c.msg, "%s %q", c.path, c.auth)
	}
}

// The probes say which dependency is down, never what its error says (an address, a user,
// a database's name): that goes to the log, once until it changes, and so does the recovery.
func TestProbesSayWhichDependencyIsDownAndLogWhy(t *testing.T) {
	t.Parallel()
	logs := &syncBuf{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	var mu sync.Mutex
	dbErr := errors.New(`failed to connect to user=walletsaga database=wallets host=db-7.internal port=5432: connection refused`)
	brokerErr := errors.New("dial tcp 10.0.3.4:9876: i/o timeout")
	e := httpx.New(httpx.Options{Logger: log})
	httpx.Probes(e, log, nil,
		httpx.Check{Name: "postgres", Fn: func(context.Context) error { mu.Lock(); defer mu.Unlock(); return dbErr }},
		httpx.Check{Name: "rocketmq", Fn: func(context.Context) error { return brokerErr }, Degraded: "events wait in the outbox"},
	)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for range 2 {
		st, body := get("/readyz")
		require.Equal(t, http.StatusServiceUnavailable, st)
		require.JSONEq(t, `{"status":"unavailable","checks":{"postgres":"down","rocketmq":"down"},"degraded":["rocketmq: events wait in the outbox"]}`, body)
	}
	st, body := get("/healthz")
	require.Equal(t, http.StatusOK, st)
	require.JSONEq(t, `{"status":"ok","checks":{"rocketmq":"down"},"degraded":["rocketmq: events wait in the outbox"]}`, body)

	require.Equal(t, 1, strings.Count(logs.String(), "db-7.internal"), "the error is logged once while it stays the same:\n%s", logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "10.0.3.4:9876"), logs.String())
	mu.Lock()
	dbErr = nil
	mu.Unlock()
	// The probes answer from a run at most ProbeFresh old: the recovery shows within it.
	require.Eventually(t, func() bool { st, _ = get("/readyz"); return st == http.StatusOK }, 3*httpx.ProbeFresh, 20*time.Millisecond)
	_, body = get("/readyz")
	require.JSONEq(t, `{"status":"ok","checks":{"postgres":"ok","rocketmq":"down"},"degraded":["rocketmq: events wait in the outbox"]}`, body)
	require.Contains(t, logs.String(), `"msg":"dependency check passes again","check":"postgres"`)
}

// No page of ours may be framed by another site's (clickjacking an operator who holds the
// operator token): the console's page says so in its policy and in X-Frame-Options, and so does
// every other answer, errors included.
func TestNothingMayBeFramed(t *testing.T) {
	t.Parallel()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	page, asset := httpx.Page(fstest.MapFS{
		"index.html": {Data: []byte("<!doctype html><title>console</title>")},
		"app.js":     {Data: []byte("")}, "style.css": {Data: []byte("")},
	})
	e.GET("/", page)
	e.GET("/assets/:name", asset)
	e.GET("/json", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]int{"n": 1}) })
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/assets/app.js", "/json", "/no-such-route"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		csp := resp.Header.Values("Content-Security-Policy")
		require.Len(t, csp, 1, path)
		require.Contains(t, csp[0], "frame-ancestors 'none'", path)
		if path == "/" {
			require.Equal(t, httpx.PageCSP, csp[0])
			require.Contains(t, csp[0], "default-src 'self'")
		}
	}
}

// A flood of probes, each hanging up at once, runs the checks once: the probes answer from
// one run at most ProbeFresh old, on a context of the probes' own, so they cannot take the
// database's connections from the requests; a check that hung is not cut short by them.
func TestAFloodOfProbesRunsTheChecksOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	release := make(chan struct{})
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	httpx.Probes(e, nil, nil, httpx.Check{Name: "postgres", Fn: func(ctx context.Context) error {
		runs.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/readyz", nil)
			require.NoError(t, err)
			if resp, err := srv.Client().Do(req); err == nil {
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(release)
	require.Eventually(t, func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, runs.Load(), "one run of the checks for the whole flood")
}

// /metrics is private when a token is set (production requires one): without the token, or
// with another, a scraper gets nothing.
func TestMetricsAreServedOnlyWithTheirToken(t *testing.T) {
	t.Parallel()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	httpx.Metrics(e, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "walletsaga_up 1\n") }),
		"a-metrics-token-of-our-own", nil)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	get := func(auth string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get(""))
	require.Equal(t, http.StatusForbidden, get("Bearer another-token-of-someone"))
	require.Equal(t, http.StatusOK, get("Bearer a-metrics-token-of-our-own"))
}

// TestProbesAndScrapesKeepToTheirClientsRate: a flood of probes and scrapes from one address
// is refused 429 past its rate, before it costs a check run or a gathering of the metrics;
// the metrics token is a client of its own, so Prometheus keeps scraping meanwhile.
func TestProbesAndScrapesKeepToTheirClientsRate(t *testing.T) {
	t.Parallel()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var r httpx.Refusals
	const token = "a-metrics-token-of-our-own"
	limit := httpx.PerClient(0.001, 2, &r, func(t string) bool { return httpx.TokenIs(t, token) })
	var checks, gathers atomic.Int64
	httpx.Probes(e, nil, limit, httpx.Check{Name: "postgres", Fn: func(context.Context) error { checks.Add(1); return nil }})
	httpx.Metrics(e, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gathers.Add(1)
		_, _ = io.WriteString(w, "walletsaga_up 1\n")
	}), token, limit)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	get := func(path, auth string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests, http.StatusTooManyRequests},
		[]int{get("/readyz", ""), get("/healthz", ""), get("/readyz", ""), get("/metrics", "a-made-up-token"), get("/metrics", "")})
	require.Equal(t, http.StatusOK, get("/metrics", token), "the metrics token is a client of its own")
	require.EqualValues(t, 1, gathers.Load(), "refused scrapes gathered nothing")
	require.LessOrEqual(t, checks.Load(), int64(1), "refused probes ran no check")
	require.EqualValues(t, 3, r.Rate.Load())
}
