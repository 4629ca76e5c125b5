package httpx_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
	e.POST("/op", func(c echo.Context) error {
		actor, err := httpx.Operator(c, "admin-token-0123456789")
		if err != nil {
			return err
		}
		return c.String(http.StatusOK, actor)
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

func TestOperatorNeedsTheAdminTokenAndAName(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t)
	do := func(auth, operator string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/op", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if operator != "" {
			req.Header.Set(httpx.OperatorHeader, operator)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	st, _ := do("", "alice")
	require.Equal(t, http.StatusUnauthorized, st)
	st, _ = do("Bearer nope-nope-nope-nope", "alice")
	require.Equal(t, http.StatusForbidden, st)
	st, _ = do("Bearer admin-token-0123456789", "")
	require.Equal(t, http.StatusBadRequest, st)
	st, _ = do("Bearer admin-token-0123456789", "bad name!")
	require.Equal(t, http.StatusBadRequest, st)
	st, body := do("Bearer admin-token-0123456789", "alice@ops")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "alice@ops", body)

	_, err := httpx.CheckReason("  ")
	require.Error(t, err)
	_, err = httpx.CheckReason(strings.Repeat("x", httpx.MaxReasonLen+1))
	require.Error(t, err)
	for _, bad := range []string{"a\x00b", "two\nlines", "tab\there", "lone \uFFFD"} {
		_, err = httpx.CheckReason(bad)
		require.ErrorContains(t, err, "printable", "%q", bad)
	}
	r, err := httpx.CheckReason(" lost in broker failover ")
	require.NoError(t, err)
	require.Equal(t, "lost in broker failover", r)
	r, err = httpx.CheckReason("服务商故障已恢复 INC-12")
	require.NoError(t, err)
	require.Equal(t, "服务商故障已恢复 INC-12", r)
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
