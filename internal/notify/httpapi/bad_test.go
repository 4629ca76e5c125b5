package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/smslog"
)

// GET /v1/bad-messages builds a bounded answer whatever the bodies: 120 bad messages of 64 KiB
// each (the most the inbox keeps of one) and one of 4 MiB (a row of an older release, which
// kept whole broker messages) give a page of at most 100, each with the first 4 KiB of its
// body, body_bytes its whole size and body_truncated set: well under a megabyte, where the
// bodies whole would be over 10 MB. GET /v1/bad-messages/{msg_id} answers one whole; a
// limit above 100 is a 400 that says the bound; the single message takes the read token
// like the list, and an unknown or malformed id is a 404 or a 400.
func TestBadMessagesAnswerBoundedPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at)
SELECT 'M' || lpad(g::text, 4, '0'), 'q@0', g, convert_to(repeat(chr(97 + g % 26), 65536), 'UTF8'), 'not JSON', $1::timestamptz + g * interval '1 second'
FROM generate_series(1, 120) g`, t0)
	require.NoError(t, err)
	huge := strings.Repeat("z", 4<<20)
	_, err = e.pool.Exec(ctx, `INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at)
VALUES ('HUGE', 'q@0', 999, convert_to($1, 'UTF8'), 'too big', $2::timestamptz + interval '1 hour')`, huge, t0)
	require.NoError(t, err)

	raw, st := e.get(t, "/v1/bad-messages?limit=100")
	require.Equal(t, http.StatusOK, st, raw[:min(len(raw), 300)])
	require.Less(t, len(raw), 1<<20, "a page of 100 is under a megabyte")
	st, v := e.do(t, http.MethodGet, "/v1/bad-messages?limit=100", "", "")
	require.Equal(t, http.StatusOK, st)
	items := v["items"].([]any)
	require.Len(t, items, 100)
	require.NotEmpty(t, v["next_cursor"])
	first := items[0].(map[string]any)
	require.Equal(t, "HUGE", first["msg_id"], "newest first")
	require.Equal(t, float64(4<<20), first["body_bytes"])
	require.Equal(t, true, first["body_truncated"])
	require.Equal(t, huge[:smslog.BadBodyExcerpt], first["body"])
	for _, it := range items[1:] {
		m := it.(map[string]any)
		require.Len(t, m["body"], smslog.BadBodyExcerpt, m["msg_id"])
		require.Equal(t, float64(65536), m["body_bytes"], m["msg_id"])
		require.Equal(t, true, m["body_truncated"], m["msg_id"])
	}
	_, v = e.do(t, http.MethodGet, "/v1/bad-messages?limit=100&cursor="+v["next_cursor"].(string), "", "")
	require.Len(t, v["items"], 21, "the rest on the next page")
	require.Nil(t, v["next_cursor"])
	_, v = e.do(t, http.MethodGet, "/v1/bad-messages", "", "")
	require.Len(t, v["items"], 50, "the default page")

	// One message, whole.
	st, v = e.do(t, http.MethodGet, "/v1/bad-messages/HUGE", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, huge, v["body"])
	require.Equal(t, float64(4<<20), v["body_bytes"])
	require.Equal(t, false, v["body_truncated"])
	require.Equal(t, 999.0, v["queue_offset"])
	require.Equal(t, "too big", v["reason"])
	st, v = e.do(t, http.MethodGet, "/v1/bad-messages/M0007", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, strings.Repeat("h", 65536), v["body"])

	st, v = e.do(t, http.MethodGet, "/v1/bad-messages/M9999", "", "")
	require.Equal(t, http.StatusNotFound, st)
	require.Equal(t, "not_found", errCode(v))
	st, v = e.do(t, http.MethodGet, "/v1/bad-messages/M%20OR%201=1", "", "")
	require.Equal(t, http.StatusBadRequest, st)
	require.Equal(t, "invalid", errCode(v))
	st, _ = e.do(t, http.MethodGet, "/v1/bad-messages/HUGE", "-", "")
	require.Equal(t, http.StatusUnauthorized, st)
	st, _ = e.do(t, http.MethodGet, "/v1/bad-messages/HUGE", "Bearer not-the-read-token", "")
	require.Equal(t, http.StatusForbidden, st)
	st, _ = e.do(t, http.MethodGet, "/v1/bad-messages/HUGE", "Bearer "+carolToken, "")
	require.Equal(t, http.StatusOK, st, "an operator's token reads too")

	// A limit above the list's bound is refused, saying the bound.
	for _, q := range []string{"limit=101", "limit=1000"} {
		st, v = e.do(t, http.MethodGet, "/v1/bad-messages?"+q, "", "")
		require.Equal(t, http.StatusBadRequest, st, q)
		require.Equal(t, "invalid", errCode(v), q)
		require.Contains(t, v["error"].(map[string]any)["message"], "limit must be between 1 and 100", q)
	}
}

// get sends a GET with the read token and returns the raw body and status.
func (e *env) get(t *testing.T, path string) (string, int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b), resp.StatusCode
}
