package httpx_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
)

const (
	aliceToken = "alice-token-Qm8vT2xLp4ZrW9sY3nBc"
	bobToken   = "bob-token-Fz7kR2mXw9LqP4tV8cNb"
)

// operators is a list of alice and bob, as a configuration file would give it.
func operators(t *testing.T) httpx.Operators {
	t.Helper()
	ops, err := httpx.ParseOperators("# who may act\n" + httpx.OperatorEntry("alice", aliceToken) + "  # on call\n\n" + httpx.OperatorEntry("bob@ops", bobToken) + "\n")
	require.NoError(t, err)
	return ops
}

func TestOperatorListsHoldNamesAndDigests(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(aliceToken))
	require.Equal(t, "alice:sha256:"+hex.EncodeToString(sum[:]), httpx.OperatorEntry("alice", aliceToken), "the digest, never the token")

	ops := operators(t)
	require.Equal(t, 2, ops.Len())
	require.Equal(t, []string{"alice", "bob@ops"}, ops.Names())
	// Commas and spaces separate entries too (one environment variable), and hex digits may
	// be upper case.
	inline, err := httpx.ParseOperators(httpx.OperatorEntry("alice", aliceToken) + "," + "bob:sha256:" + strings.ToUpper(httpx.OperatorEntry("bob", bobToken)[len("bob:sha256:"):]) + " " + httpx.OperatorEntry("carol", "c"))
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "bob", "carol"}, inline.Names())
	none, err := httpx.ParseOperators("# nobody yet\n\n")
	require.NoError(t, err)
	require.Zero(t, none.Len())

	digest := httpx.OperatorEntry("x", aliceToken)[2:]
	for text, want := range map[string]string{
		"alice":                   "line 1: an entry is name:sha256:<64 hex digits>",
		"\n\nalice:" + aliceToken: "line 3 (alice): the token is given as sha256:<64 hex digits>, its SHA-256 digest",
		"alice:sha256:" + strings.Repeat("ab", 31):                        "line 1 (alice): the token is given as sha256:",
		"alice:md5:" + strings.Repeat("ab", 32):                           "line 1 (alice): the token is given as sha256:",
		"alice:sha256:" + strings.Repeat("zz", 32):                        "line 1 (alice): the token is given as sha256:",
		"al ice:" + digest:                                                "line 1: an entry is name:sha256:",
		"alice!:" + digest:                                                "line 1: an operator's name is 1–64 letters, digits",
		":" + digest:                                                      "line 1: an operator's name is 1–64",
		strings.Repeat("a", 65) + ":" + digest:                            "line 1: an operator's name is 1–64",
		"alice:" + digest + "\n" + httpx.OperatorEntry("alice", bobToken): "line 2 (alice): alice is listed twice",
		"alice:" + digest + "\nbob:" + digest:                             "line 2 (bob): has the token of alice: each operator needs a token of their own",
		httpx.OperatorEntry("nobody", ""):                                 "line 1 (nobody): is the digest of an empty token",
		"alice:" + digest + " # fine\nbob:" + aliceToken:                  "line 2 (bob): the token is given as",
	} {
		_, err := httpx.ParseOperators(text)
		require.ErrorContains(t, err, want, "%q", text)
		require.NotContains(t, err.Error(), aliceToken, "a token is never echoed")
		require.NotContains(t, err.Error(), digest[7:], "nor a digest")
	}
}

func TestIdentifyFindsTheOperatorWhoseTokenItIs(t *testing.T) {
	t.Parallel()
	ops := operators(t)
	for token, want := range map[string]string{aliceToken: "alice", bobToken: "bob@ops"} {
		name, ok := ops.Identify(token)
		require.True(t, ok)
		require.Equal(t, want, name)
	}
	for _, wrong := range []string{"", "alice", aliceToken[:len(aliceToken)-1], aliceToken + "x", strings.ToUpper(aliceToken), httpx.OperatorEntry("alice", aliceToken)} {
		name, ok := ops.Identify(wrong)
		require.False(t, ok, "%q", wrong)
		require.Empty(t, name)
	}
	_, ok := httpx.Operators{}.Identify(aliceToken)
	require.False(t, ok, "no operators: no one")
}

// operatorServer serves POST /op, an operator action that answers with its actor, and
// GET /read, a read route that the read token or any operator may call.
func operatorServer(t *testing.T, ops httpx.Operators, readToken string) *httptest.Server {
	t.Helper()
	e := httpx.New(httpx.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.POST("/op", func(c echo.Context) error {
		var body struct {
			Reason string `json:"reason"`
		}
		actor, err := httpx.OperatorRequest(c, ops, &body, &body.Reason)
		if err != nil {
			return err
		}
		return c.String(http.StatusOK, actor)
	})
	e.GET("/read", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) },
		httpx.RequireBearerOrOperator("read", "reads are disabled: no token is configured", readToken, ops))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

// send sends method path with the Authorization auth (none when empty), each X-Operator of
// operators, and body (JSON); it returns the status, the body, and WWW-Authenticate.
func send(t *testing.T, srv *httptest.Server, method, path, auth, body string, operators ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for _, o := range operators {
		req.Header.Add(httpx.OperatorHeader, o)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")
}

// The token says who acts: the right token is its operator, a wrong one 403, none 401; an
// X-Operator header cannot name anyone else (400), whatever token comes with it.
func TestAnOperatorIsWhoseTokenTheRequestBears(t *testing.T) {
	t.Parallel()
	srv := operatorServer(t, operators(t), "")
	const reason = `{"reason":"provider is back"}`
	for _, c := range []struct {
		name, auth string
		operators  []string
		status     int
		want       string
	}{
		{"alice's token", "Bearer " + aliceToken, nil, http.StatusOK, "alice"},
		{"bob's token", "bearer  " + bobToken + " ", nil, http.StatusOK, "bob@ops"},
		{"X-Operator naming the token's operator", "Bearer " + aliceToken, []string{"alice"}, http.StatusOK, "alice"},
		{"X-Operator naming someone else", "Bearer " + bobToken, []string{"alice"}, http.StatusBadRequest,
			"the X-Operator header names someone other than the operator whose token this is (bob@ops)"},
		{"X-Operator naming someone else in other capitals", "Bearer " + aliceToken, []string{"Alice"}, http.StatusBadRequest, "audit trail records alice"},
		{"a second X-Operator naming someone else", "Bearer " + aliceToken, []string{"alice", "bob@ops"}, http.StatusBadRequest, "leave the header out"},
		{"an empty X-Operator", "Bearer " + aliceToken, []string{""}, http.StatusBadRequest, "names someone other"},
		{"no token", "", []string{"alice"}, http.StatusUnauthorized, "an operator token is required"},
		{"an empty bearer", "Bearer ", nil, http.StatusUnauthorized, "an operator token is required"},
		{"a Basic token", "Basic " + aliceToken, nil, http.StatusUnauthorized, "Authorization: Bearer"},
		{"a wrong token", "Bearer " + aliceToken + "x", nil, http.StatusForbidden, "the operator token is not valid"},
		{"a wrong token naming an operator", "Bearer not-anyones-token-at-all", []string{"alice"}, http.StatusForbidden, "the operator token is not valid"},
		{"an entry of the list as the token", "Bearer " + httpx.OperatorEntry("alice", aliceToken), nil, http.StatusForbidden, "not valid"},
	} {
		status, body, challenge := send(t, srv, http.MethodPost, "/op", c.auth, reason, c.operators...)
		require.Equal(t, c.status, status, "%s: %s", c.name, body)
		require.Contains(t, body, c.want, c.name)
		if status == http.StatusUnauthorized {
			require.Equal(t, `Bearer realm="operator"`, challenge, c.name)
		}
	}
	// Who acts is settled before the body is read: a bad body of a stranger is 401/403.
	status, _, _ := send(t, srv, http.MethodPost, "/op", "", `{"reason":`)
	require.Equal(t, http.StatusUnauthorized, status)
	status, body, _ := send(t, srv, http.MethodPost, "/op", "Bearer "+aliceToken, `{"reason":""}`)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "reason is required")

	// Without operators the endpoints are disabled, whatever is sent.
	off := operatorServer(t, httpx.Operators{}, "")
	status, body, _ = send(t, off, http.MethodPost, "/op", "Bearer "+aliceToken, reason, "alice")
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "operator endpoints are disabled: no operator is configured")
}

// The read routes take the read token or any operator's; nothing else.
func TestReadRoutesTakeTheReadTokenOrAnOperators(t *testing.T) {
	t.Parallel()
	const readToken = "read-token-Zk3pQ8wLm2Xv7Rt"
	for _, c := range []struct {
		name      string
		ops       httpx.Operators
		readToken string
		auth      string
		status    int
		want      string
	}{
		{"the read token", operators(t), readToken, "Bearer " + readToken, http.StatusNoContent, ""},
		{"an operator's token", operators(t), readToken, "Bearer " + bobToken, http.StatusNoContent, ""},
		{"an operator's token, no read token", operators(t), "", "Bearer " + aliceToken, http.StatusNoContent, ""},
		{"the read token, no operators", httpx.Operators{}, readToken, "Bearer " + readToken, http.StatusNoContent, ""},
		{"a wrong token", operators(t), readToken, "Bearer " + readToken + "x", http.StatusForbidden, "the read token is not valid"},
		{"an empty bearer, no read token", operators(t), "", "Bearer ", http.StatusUnauthorized, "a read token is required"},
		{"no token", operators(t), readToken, "", http.StatusUnauthorized, "a read token is required"},
		{"neither configured", httpx.Operators{}, "", "Bearer " + aliceToken, http.StatusForbidden, "reads are disabled: no token is configured"},
	} {
		srv := operatorServer(t, c.ops, c.readToken)
		status, body, _ := send(t, srv, http.MethodGet, "/read", c.auth, "")
		require.Equal(t, c.status, status, "%s: %s", c.name, body)
		require.Contains(t, body, c.want, c.name)
	}
}
