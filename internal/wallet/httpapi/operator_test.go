package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUserFacingRoutesNeedTheServiceToken(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	before := s.counts(t)
	res := s.do(t, http.MethodPost, "/v1/users", `{"name":"Han Meimei","phone":"+8613800138001"}`, "Authorization", "")
	require.Equal(t, http.StatusUnauthorized, res.status, res.raw)
	require.Equal(t, "unauthorized", res.body["error"].(map[string]any)["code"])
	require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer")
	res = s.do(t, http.MethodGet, "/v1/sagas", "", "Authorization", "Bearer "+aliceToken)
	require.Equal(t, http.StatusForbidden, res.status, "an operator's token is not the service token")
	res = s.do(t, http.MethodGet, "/v1/sagas", "", "Authorization", "Bearer wrong-token-wrong-token")
	require.Equal(t, http.StatusForbidden, res.status)
	require.Equal(t, before, s.counts(t), "nothing was written")
	doc, err := http.Get(s.url + "/openapi.yaml")
	require.NoError(t, err)
	doc.Body.Close()
	require.Equal(t, http.StatusOK, doc.StatusCode, "the API description is open")
	id := s.createUser(t)
	res = s.do(t, http.MethodGet, "/v1/users/"+strconv.FormatInt(id, 10)+"/wallet", "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
}

// needsAttention runs a deposit (inline, to its end; no recovery runs) and puts it where a
// failed compensation leaves a saga.
func (s *server) needsAttention(t *testing.T, user int64) string {
	t.Helper()
	res := s.do(t, http.MethodPost, "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits?wait=true", `{"amount":500}`)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	id := int64(res.body["id"].(float64))
	_, err := s.pool.Exec(s.ctx, `UPDATE sagas SET state = 'needs_attention', phase = 'compensate', attempts = 5,
		error_code = 'compensation_failed', error_message = 'refund failed' WHERE id = $1`, id)
	require.NoError(t, err)
	return strconv.FormatInt(id, 10)
}

func TestOperatorRetriesAndResolvesSagasWithAnAuditTrail(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	user := s.createUser(t)
	first, second := s.needsAttention(t, user), s.needsAttention(t, user)
	admin := []string{"Authorization", "Bearer " + aliceToken}

	// Who may act.
	res := s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{"reason":"refund API is back"}`)
	require.Equal(t, http.StatusForbidden, res.status, "the service token is not enough: %s", res.raw)
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{"reason":"refund API is back"}`, "Authorization", "")
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Equal(t, `Bearer realm="operator"`, res.header.Get("WWW-Authenticate"))
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{"reason":"  "}`, admin...)
	require.Equal(t, http.StatusBadRequest, res.status, "a reason is required: %s", res.raw)
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{}`, admin...)
	require.Equal(t, http.StatusBadRequest, res.status)

	// Retry: back to compensating, audited.
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{"reason":"refund API is back"}`, admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "compensating", res.body["state"])
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/retry", `{"reason":"again"}`, admin...)
	require.Equal(t, http.StatusConflict, res.status, "only a saga in needs_attention: %s", res.raw)
	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/resolve", `{"reason":"x"}`, admin...)
	require.Equal(t, http.StatusConflict, res.status)

	// Resolve: terminal, audited, listed by state.
	res = s.do(t, http.MethodPost, "/v1/sagas/"+second+"/resolve", `{"reason":"refunded by hand, ticket OPS-7"}`,
		"Authorization", "Bearer "+bobToken, "X-Operator", "bob@ops") // a header naming the token's own operator is accepted
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "resolved", res.body["state"])
	res = s.do(t, http.MethodGet, "/v1/sagas?state=resolved", "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Len(t, res.body["items"], 1)

	res = s.do(t, http.MethodPost, "/v1/sagas/999999/resolve", `{"reason":"x"}`, admin...)
	require.Equal(t, http.StatusNotFound, res.status)

	var rows []string
	r, err := s.pool.Query(s.ctx, `SELECT actor || '|' || action || '|' || saga_id || '|' || reason FROM audit ORDER BY id`)
	require.NoError(t, err)
	for r.Next() {
		var row string
		require.NoError(t, r.Scan(&row))
		rows = append(rows, row)
	}
	require.NoError(t, r.Err())
	require.Equal(t, []string{
		"alice|retry_saga|" + first + "|refund API is back",
		"bob@ops|resolve_saga|" + second + "|refunded by hand, ticket OPS-7",
	}, rows, "one audit row per action that happened, none for refused ones")

	res = s.do(t, http.MethodGet, "/v1/sagas/"+second+"/audit", "", "Authorization", "Bearer "+aliceToken)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	items := res.body["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "bob@ops", items[0].(map[string]any)["actor"])
	res = s.do(t, http.MethodGet, "/v1/sagas/"+second+"/audit", "")
	require.Equal(t, http.StatusForbidden, res.status, "the audit trail is for operators")
}

// The audit row names the operator whose token acted, never whom an X-Operator header names:
// a header naming someone else is refused (400) and writes nothing, whatever the token; the
// token alone, with or without a header naming its own operator, writes its operator.
func TestTheAuditNamesTheTokensOperatorNotTheHeaders(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	user := s.createUser(t)
	first, second := s.needsAttention(t, user), s.needsAttention(t, user)

	res := s.do(t, http.MethodPost, "/v1/sagas/"+first+"/resolve", `{"reason":"refunded by hand, OPS-9"}`,
		"Authorization", "Bearer "+bobToken, "X-Operator", "alice")
	require.Equal(t, http.StatusBadRequest, res.status, "bob's token cannot act as alice: %s", res.raw)
	require.Equal(t, "invalid", res.body["error"].(map[string]any)["code"])
	require.Contains(t, res.raw, "names someone other than the operator whose token this is (bob@ops)")
	res = s.do(t, http.MethodGet, "/v1/operator/sagas/"+first, "", "Authorization", "Bearer "+bobToken)
	require.Equal(t, "needs_attention", res.body["state"], "the refused action did nothing: %s", res.raw)

	res = s.do(t, http.MethodPost, "/v1/sagas/"+first+"/resolve", `{"reason":"refunded by hand, OPS-9"}`, "Authorization", "Bearer "+bobToken)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	res = s.do(t, http.MethodPost, "/v1/sagas/"+second+"/retry", `{"reason":"refund API is back"}`,
		"Authorization", "Bearer "+aliceToken, "X-Operator", "alice")
	require.Equal(t, http.StatusOK, res.status, res.raw)

	var actors []string
	r, err := s.pool.Query(s.ctx, `SELECT actor || ' ' || action || ' ' || saga_id FROM audit ORDER BY id`)
	require.NoError(t, err)
	for r.Next() {
		var a string
		require.NoError(t, r.Scan(&a))
		actors = append(actors, a)
	}
	require.NoError(t, r.Err())
	require.Equal(t, []string{"bob@ops resolve_saga " + first, "alice retry_saga " + second}, actors)
	res = s.do(t, http.MethodGet, "/v1/sagas/"+first+"/audit", "", "Authorization", "Bearer "+aliceToken)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "bob@ops", res.body["items"].([]any)[0].(map[string]any)["actor"])
}

func TestAPhoneNeverReachesTheLog(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	res := s.do(t, http.MethodPost, "/v1/users", `{"name":"a","phone":"+86 139 7654 3210"}`)
	require.Equal(t, http.StatusBadRequest, res.status)
	require.NotContains(t, res.raw, "7654", "the message (which the access log records) does not echo the phone")
}

func TestOperatorListsSagasByStateAPageAtATime(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	user := s.createUser(t)
	var attention []string
	for range 3 {
		attention = append(attention, s.needsAttention(t, user))
	}
	done := s.do(t, http.MethodPost, "/v1/users/"+strconv.FormatInt(user, 10)+"/deposits?wait=true", `{"amount":700}`)
	require.Equal(t, http.StatusOK, done.status, done.raw)
	admin := []string{"Authorization", "Bearer " + bobToken}

	// Only an operator reads it.
	res := s.do(t, http.MethodGet, "/v1/operator/sagas", "", "Authorization", "")
	require.Equal(t, http.StatusUnauthorized, res.status, res.raw)
	res = s.do(t, http.MethodGet, "/v1/operator/sagas", "")
	require.Equal(t, http.StatusForbidden, res.status, "the service token is no operator's: %s", res.raw)

	// needs_attention, newest first, two at a time: the pages hold each saga once.
	res = s.do(t, http.MethodGet, "/v1/operator/sagas?state=needs_attention&limit=2", "", admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	items := res.body["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, attention[2], strconv.FormatFloat(items[0].(map[string]any)["id"].(float64), 'f', -1, 64), "newest first")
	require.Equal(t, "needs_attention", items[0].(map[string]any)["state"])
	next := res.body["next_cursor"].(string)
	res = s.do(t, http.MethodGet, "/v1/operator/sagas?state=needs_attention&limit=2&cursor="+next, "", admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	items = res.body["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, attention[0], strconv.FormatFloat(items[0].(map[string]any)["id"].(float64), 'f', -1, 64))
	require.Nil(t, res.body["next_cursor"])
	res = s.do(t, http.MethodGet, "/v1/operator/sagas?state=completed", "", admin...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Len(t, res.body["items"], 1)

	// Bad pages are refused with a clear 400.
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=abc", "cursor=0", "state=", "state=stuck"} {
		res = s.do(t, http.MethodGet, "/v1/operator/sagas?"+q, "", admin...)
		require.Equal(t, http.StatusBadRequest, res.status, "%s: %s", q, res.raw)
		require.Equal(t, "invalid", res.body["error"].(map[string]any)["code"], q)
	}
}

// The saga console is open (it holds no data and asks for an operator's token), loads nothing
// from elsewhere, and reads the operator list and actions.
func TestConsoleIsSelfContained(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	for _, p := range []struct{ path, ctype string }{
		{"/", "text/html"}, {"/assets/app.js", "javascript"}, {"/assets/style.css", "text/css"},
	} {
		resp, err := http.Get(s.url + p.path)
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
		if p.path == "/assets/app.js" {
			for _, want := range []string{"/v1/operator/sagas", "needs_attention", `"retry"`, `"resolve"`, "Authorization"} {
				require.Contains(t, string(b), want)
			}
			require.NotContains(t, string(b), "X-Operator", "the token names the operator; the page sends no name")
		}
	}
	resp, err := http.Get(s.url + "/assets/index.html")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestEventsPageByCursor(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	user := strconv.FormatInt(s.createUser(t), 10)
	for range 3 {
		res := s.do(t, http.MethodPost, "/v1/users/"+user+"/deposits?wait=true", `{"amount":100}`)
		require.Equal(t, http.StatusOK, res.status, res.raw)
	}
	res := s.do(t, http.MethodGet, "/v1/users/"+user+"/events?limit=2", "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Len(t, res.body["items"], 2)
	require.Equal(t, "2", res.body["next_cursor"])
	res = s.do(t, http.MethodGet, "/v1/users/"+user+"/events?limit=2&after=2", "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Len(t, res.body["items"], 1)
	require.Equal(t, 3.0, res.body["items"].([]any)[0].(map[string]any)["seq"])
	require.Nil(t, res.body["next_cursor"], "the last page")
	res = s.do(t, http.MethodGet, "/v1/users/"+user+"/events?limit=1001", "")
	require.Equal(t, http.StatusBadRequest, res.status, res.raw)
}
