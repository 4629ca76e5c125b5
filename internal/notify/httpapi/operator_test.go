package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
)

func TestSkipALostSeqAdvancesTheUserWithAnAuditRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// User 5 got seq 1; seq 3 arrived and waits in the inbox; seq 2 never arrived: a gap for
	// ten minutes. User 6 waited the same way, but its seq 2 has arrived now and is pending.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, gap_since) VALUES
			(5, 1, now() - interval '10 minutes'), (6, 1, now());
		INSERT INTO notify.notifications (user_id, seq, status, attempts) VALUES
			(5, 1, 'sent', 1), (5, 3, 'pending', 0), (6, 1, 'sent', 1), (6, 2, 'pending', 1), (6, 3, 'pending', 0)`)
	require.NoError(t, err)
	auth := "Bearer " + adminToken
	body := `{"seq":2,"reason":"lost in a broker failover, INC-12"}`

	st, v := e.do(t, http.MethodGet, "/v1/gate", "", "")
	require.Equal(t, http.StatusOK, st, "%v", v)
	gaps := v["gaps"].([]any)
	require.Len(t, gaps, 2)
	oldest := gaps[0].(map[string]any)
	require.Equal(t, 5.0, oldest["user_id"])
	require.Equal(t, 2.0, oldest["missing_seq"])
	require.Equal(t, 1.0, oldest["waiting"])
	require.Equal(t, true, oldest["alert"], "older than GAP_ALERT_AFTER (5 min)")
	require.Equal(t, false, gaps[1].(map[string]any)["alert"])
	require.EqualValues(t, 1, v["gap_alerts"])
	require.Equal(t, "closed", v["breaker"].(map[string]any)["state"])
	require.Equal(t, float64(gate.DefaultWorkers), v["workers"])
	require.Equal(t, map[string]any{"base": "1s", "max": "5m0s", "max_attempts": 8.0, "dead_letter_after": "15m0s"}, v["retry_policy"])
	require.EqualValues(t, 3, v["pending"])

	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", "", body)
	require.Equal(t, http.StatusUnauthorized, st)
	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", "Bearer not-the-admin-token", body)
	require.Equal(t, http.StatusForbidden, st)
	st, _ = e.doAs(t, http.MethodPost, "/v1/gate/5/skip", auth, "", body)
	require.Equal(t, http.StatusBadRequest, st, "X-Operator is required")
	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", auth, `{"seq":2}`)
	require.Equal(t, http.StatusBadRequest, st, "a reason is required")
	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", auth, `{"reason":"x"}`)
	require.Equal(t, http.StatusBadRequest, st, "the seq is required")
	st, v = e.do(t, http.MethodPost, "/v1/gate/5/skip", auth, `{"seq":3,"reason":"x"}`)
	require.Equal(t, http.StatusConflict, st, "only the missing seq can be skipped: %v", v)
	st, v = e.do(t, http.MethodPost, "/v1/gate/2/skip", auth, `{"seq":2,"reason":"x"}`)
	require.Equal(t, http.StatusConflict, st, "user 2 is not held: %v", v)
	st, v = e.do(t, http.MethodPost, "/v1/gate/6/skip", auth, body)
	require.Equal(t, http.StatusConflict, st, "a seq that arrived is not lost: %v", v)

	st, v = e.do(t, http.MethodPost, "/v1/gate/5/skip", auth, body)
	require.Equal(t, http.StatusOK, st, "%v", v)
	require.Equal(t, map[string]any{"user_id": 5.0, "skipped_seq": 2.0, "last_seq": 2.0}, v)

	var status string
	var last int64
	var gapSince *time.Time
	var due bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = 5 AND seq = 2`).Scan(&status))
	require.Equal(t, "skipped_by_operator", status)
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT last_seq, gap_since, due_at <= now() FROM notify.progress WHERE user_id = 5`).Scan(&last, &gapSince, &due))
	require.Equal(t, int64(2), last, "advanced past the skipped seq; seq 3 is next")
	require.Nil(t, gapSince, "the gap is closed")
	require.True(t, due, "and the user is due for a lane")

	st, v = e.do(t, http.MethodPost, "/v1/gate/5/skip", auth, body)
	require.Equal(t, http.StatusConflict, st, "a second skip finds nothing missing: %v", v)

	st, v = e.do(t, http.MethodGet, "/v1/audit", "", "")
	require.Equal(t, http.StatusOK, st, "%v", v)
	items := v["items"].([]any)
	require.Len(t, items, 1, "refused skips leave no audit row")
	got := items[0].(map[string]any)
	require.Equal(t, "tester", got["actor"])
	require.Equal(t, "skip_missing_seq", got["action"])
	require.Equal(t, 5.0, got["user_id"])
	require.Equal(t, 2.0, got["seq"])
	require.Equal(t, "lost in a broker failover, INC-12", got["reason"])

	st, v = e.do(t, http.MethodGet, "/v1/users/5/sms", "", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "skipped_by_operator", v["items"].([]any)[1].(map[string]any)["status"])
}

func TestThePageListsTheOperatorActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp, err := e.srv.Client().Get(e.srv.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, want := range []string{"/v1/dead-letters/{user_id}/{seq}/replay", "/v1/gate/{user_id}/skip",
		"/v1/sagas/{id}/retry", "/v1/sagas/{id}/resolve", "X-Operator", "/v1/audit"} {
		require.Contains(t, string(b), want)
	}
}
