package httpx_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
)

func admissionServer(t *testing.T, mw echo.MiddlewareFunc, h echo.HandlerFunc) *httptest.Server {
	t.Helper()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.GET("/x", h, mw)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

// getAs GETs /x with token (none: "") and returns the status and the headers.
func getAs(t *testing.T, srv *httptest.Server, token string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestARouteServesAtMostItsBoundAtOnce: while two requests are served, a third is answered
// 503 at once, with Retry-After, and counted; once one ends, the next is served.
func TestARouteServesAtMostItsBoundAtOnce(t *testing.T) {
	t.Parallel()
	var r httpx.Refusals
	entered, release := make(chan struct{}, 2), make(chan struct{})
	srv := admissionServer(t, httpx.InFlight(2, &r), func(c echo.Context) error {
		entered <- struct{}{}
		<-release
		return c.NoContent(http.StatusOK)
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { require.Equal(t, http.StatusOK, status(getAs(t, srv, ""))) })
	}
	<-entered
	<-entered
	st, h := getAs(t, srv, "")
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "1", h.Get("Retry-After"))
	require.EqualValues(t, 1, r.InFlight.Load())
	close(release)
	wg.Wait()
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "")), "a slot is free again")
}

// TestEachClientKeepsToItsRate: a client past its burst is answered 429 with Retry-After and
// counted; another client (another token, or none: its address) is not held by it.
func TestEachClientKeepsToItsRate(t *testing.T) {
	t.Parallel()
	var r httpx.Refusals
	srv := admissionServer(t, httpx.PerClient(0.001, 2, &r, knownTokens("token-of-a", "token-of-b")), func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "token-of-a")))
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "token-of-a")))
	st, h := getAs(t, srv, "token-of-a")
	require.Equal(t, http.StatusTooManyRequests, st)
	require.Equal(t, "1", h.Get("Retry-After"))
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "token-of-b")), "another client")
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "")), "a client without a token, by its address")
	require.EqualValues(t, 1, r.Rate.Load())
}

func status(st int, _ http.Header) int { return st }

// knownTokens is PerClient's known for a service whose valid tokens are tokens.
func knownTokens(tokens ...string) func(string) bool {
	return func(t string) bool { return httpx.TokenIs(t, tokens...) }
}

// TestAMadeUpTokenCountsAgainstItsAddress: a request whose bearer token is not valid is its
// address's, so a client that sends a new made-up token with each request keeps to its
// address's rate instead of taking a new bucket (and the limiter's memory) with each.
func TestAMadeUpTokenCountsAgainstItsAddress(t *testing.T) {
	t.Parallel()
	var r httpx.Refusals
	srv := admissionServer(t, httpx.PerClient(0.001, 2, &r, knownTokens("token-of-a")), func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	var statuses []int
	for i := range 4 {
		statuses = append(statuses, status(getAs(t, srv, "made-up-"+strconv.Itoa(i))))
	}
	require.Equal(t, []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests}, statuses)
	require.Equal(t, http.StatusTooManyRequests, status(getAs(t, srv, "")), "the same address without a token")
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "token-of-a")), "a valid token is a client of its own")
	require.EqualValues(t, 3, r.Rate.Load())
}

// TestARateCannotBeDodgedWithAForwardedForHeader: a client without a token is its
// connection's address, not an address its X-Forwarded-For claims: a new header on each
// request does not give it a new bucket.
func TestARateCannotBeDodgedWithAForwardedForHeader(t *testing.T) {
	t.Parallel()
	var r httpx.Refusals
	srv := admissionServer(t, httpx.PerClient(0.001, 1, &r, knownTokens()), func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	var statuses []int
	for i := range 3 {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", "203.0.113."+strconv.Itoa(i+1))
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	require.Equal(t, []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests}, statuses)
}

// TestRefusalsAreNotLoggedAboveDebug: a request refused at the door (429 past its rate, 503
// past a bound in flight) is counted, not logged at info or error: a flood must not turn into
// as many log lines. A 500 of the handler's own is still logged as an error.
func TestRefusalsAreNotLoggedAboveDebug(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var mu sync.Mutex
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	var r httpx.Refusals
	e.GET("/rated", func(c echo.Context) error { return c.NoContent(http.StatusOK) }, httpx.PerClient(0.001, 1, &r, knownTokens()))
	e.GET("/broken", func(c echo.Context) error { return errors.New("the handler's own failure") })
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	get := func(path string) int {
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/rated"))
	mu.Lock()
	logged.Reset()
	mu.Unlock()
	for range 3 {
		require.Equal(t, http.StatusTooManyRequests, get("/rated"))
	}
	// Past a bound in flight: a bound of 1 whose slot a request holds, its refusal handed to
	// the error handler as echo would.
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/full", nil), httptest.NewRecorder())
	full := httpx.InFlight(1, &r)
	hold := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = full(func(echo.Context) error { close(held); <-hold; return nil })(e.NewContext(httptest.NewRequest(http.MethodGet, "/full", nil), httptest.NewRecorder()))
	}()
	<-held
	err := full(func(echo.Context) error { return nil })(c)
	close(hold)
	require.ErrorIs(t, err, httpx.ErrRefused)
	httpx.ErrorHandler(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil)))(err, c)
	require.Equal(t, http.StatusServiceUnavailable, c.Response().Status)
	mu.Lock()
	require.Empty(t, logged.String(), "refusals logged")
	mu.Unlock()
	require.Equal(t, http.StatusInternalServerError, get("/broken"))
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logged.String(), "the handler's own failure")
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestARefusalsAnswerIsHeld: with a Hold, a refusal is answered no sooner than Hold later, so
// a client that asks again at once, ignoring Retry-After, is slowed to a request per Hold; a
// request admitted is not held, and a client that hangs up is let go.
func TestARefusalsAnswerIsHeld(t *testing.T) {
	t.Parallel()
	r := &httpx.Refusals{Hold: 300 * time.Millisecond}
	srv := admissionServer(t, httpx.PerClient(0.001, 1, r, knownTokens()), func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	t0 := time.Now()
	require.Equal(t, http.StatusOK, status(getAs(t, srv, "")))
	require.Less(t, time.Since(t0), 300*time.Millisecond, "an admitted request is not held")
	t0 = time.Now()
	require.Equal(t, http.StatusTooManyRequests, status(getAs(t, srv, "")))
	require.GreaterOrEqual(t, time.Since(t0), 300*time.Millisecond, "the refusal held")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/x", nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.ErrorIs(t, err, context.DeadlineExceeded, "the client hung up while its refusal was held")
	require.Eventually(t, func() bool { return r.Rate.Load() == 2 }, time.Second, 10*time.Millisecond, "each refusal counted")
}

// TestAFailedCredentialsAnswerIsHeld: a 401 or 403 is answered no sooner than Hold later, an
// answer of any other kind at once.
func TestAFailedCredentialsAnswerIsHeld(t *testing.T) {
	t.Parallel()
	r := &httpx.Refusals{Hold: 300 * time.Millisecond}
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.Use(httpx.HoldFailedAuth(r))
	e.GET("/x", func(c echo.Context) error {
		switch c.QueryParam("as") {
		case "nobody":
			return apperr.New(apperr.Unauthorized, "a token is required")
		case "stranger":
			return apperr.New(apperr.Forbidden, "the token is not valid")
		case "absent":
			return apperr.New(apperr.NotFound, "no such thing")
		}
		return c.NoContent(http.StatusOK)
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	for as, want := range map[string]int{"nobody": http.StatusUnauthorized, "stranger": http.StatusForbidden, "absent": http.StatusNotFound, "ok": http.StatusOK} {
		t0 := time.Now()
		resp, err := srv.Client().Get(srv.URL + "/x?as=" + as)
		require.NoError(t, err)
		_ = resp.Body.Close()
		took := time.Since(t0)
		require.Equal(t, want, resp.StatusCode, as)
		if want == http.StatusUnauthorized || want == http.StatusForbidden {
			require.GreaterOrEqual(t, took, 300*time.Millisecond, "%s: held", as)
		} else {
			require.Less(t, took, 300*time.Millisecond, "%s: not held", as)
		}
	}
}
