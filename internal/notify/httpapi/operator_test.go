package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSkipALostSeqAdvancesTheUserWithAnAuditRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// User 5 got seq 1; seq 3 arrived and is parked; seq 2 never arrived. User 6 is held the
	// same way, but its seq 2 has arrived and is being delivered.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, waiting_seq, waiting_since) VALUES
			(5, 1, 3, now() - interval '10 minutes'), (6, 1, 3, now());
		INSERT INTO notify.notifications (user_id, seq, status, attempts) VALUES
			(5, 1, 'sent', 1), (5, 3, 'parked', 0), (6, 1, 'sent', 1), (6, 2, 'pending', 1), (6, 3, 'parked', 0)`)
	require.NoError(t, err)
	auth := "Bearer " + adminToken
	body := `{"seq":2,"reason":"lost in a broker failover, INC-12"}`

	st, v := e.do(t, http.MethodGet, "/v1/gate", "", "")
	require.Equal(t, http.StatusOK, st, "%v", v)
	require.Len(t, v["waiting"], 2)

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
	var waiting *int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = 5 AND seq = 2`).Scan(&status))
	require.Equal(t, "skipped_by_operator", status)
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT last_seq, waiting_seq FROM notify.progress WHERE user_id = 5`).Scan(&last, &waiting))
	require.Equal(t, int64(2), last, "advanced past the skipped seq; the parked seq 3 is next")
	require.Nil(t, waiting, "the wait is over")

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
