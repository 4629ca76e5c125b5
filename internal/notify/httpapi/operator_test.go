package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	auth := "Bearer " + testerToken
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
	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", "Bearer not-an-operators-token", body)
	require.Equal(t, http.StatusForbidden, st)
	st, _ = e.do(t, http.MethodPost, "/v1/gate/5/skip", "Bearer "+readToken, body)
	require.Equal(t, http.StatusForbidden, st, "the read token only reads")
	st, _ = e.doAs(t, http.MethodPost, "/v1/gate/5/skip", auth, "carol", body)
	require.Equal(t, http.StatusBadRequest, st, "X-Operator cannot name another operator")
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

// The audit row names the operator whose token acted, never whom an X-Operator header names:
// carol's token with a header naming tester is refused (400) and sends and records nothing;
// carol's token alone replays and skips as carol.
func TestTheAuditNamesTheTokensOperatorNotTheHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, gap_since) VALUES (5, 1, now());
		INSERT INTO notify.notifications (user_id, seq, status, attempts) VALUES (5, 1, 'sent', 1), (5, 3, 'pending', 0)`)
	require.NoError(t, err)
	carol := "Bearer " + carolToken
	const replay, skip = "/v1/dead-letters/1/2/replay", "/v1/gate/5/skip"

	st, v := e.doAs(t, http.MethodPost, replay, carol, "tester", `{"reason":"provider outage"}`)
	require.Equal(t, http.StatusBadRequest, st, "%v", v)
	require.Contains(t, v["error"].(map[string]any)["message"], "names someone other than the operator whose token this is (carol)")
	st, v = e.doAs(t, http.MethodPost, skip, carol, "tester", `{"seq":2,"reason":"lost in a broker failover"}`)
	require.Equal(t, http.StatusBadRequest, st, "%v", v)
	require.NotContains(t, e.out.String(), "late=true", "the refused replay sent nothing")

	st, v = e.do(t, http.MethodPost, replay, carol, `{"reason":"provider outage"}`)
	require.Equal(t, http.StatusOK, st, "%v", v)
	st, v = e.doAs(t, http.MethodPost, skip, carol, "carol", `{"seq":2,"reason":"lost in a broker failover"}`)
	require.Equal(t, http.StatusOK, st, "a header naming the token's own operator is accepted: %v", v)

	rows, err := e.pool.Query(ctx, `SELECT actor || ' ' || action FROM notify.audit ORDER BY id`)
	require.NoError(t, err)
	audited, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"carol replay_dead_letter", "carol skip_missing_seq"}, audited)
	st, v = e.do(t, http.MethodGet, "/v1/audit", "", "")
	require.Equal(t, http.StatusOK, st, "%v", v)
	for _, item := range v["items"].([]any) {
		require.Equal(t, "carol", item.(map[string]any)["actor"])
	}
}

func TestThePageListsTheOperatorActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	resp, err := e.srv.Client().Get(e.srv.URL + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, want := range []string{"/v1/dead-letters/{user_id}/{seq}/replay", "/v1/gate/{user_id}/skip", "/v1/gate/{user_id}/skip-through",
		"/v1/sagas/{id}/retry", "/v1/sagas/{id}/resolve", "OPERATOR_TOKENS", "/v1/audit"} {
		require.Contains(t, string(b), want)
	}
	require.NotContains(t, string(b), "X-Operator", "the token names the operator")
}

// TestSkipThroughMovesAUserPastARangeInOneAuditedStep: user 7 got seqs 1 and 2; 3–5 and 7
// never arrived (older than the broker keeps), 6 and 8 wait. Skipping through 7 records the
// four lost seqs skipped and advances the user to 5, before 6, which is sent; one audit row
// says who, why and the range. Refused, changing nothing: a range before the user's next
// seq, one behind which nothing waits, one with nothing lost, one too long.
func TestSkipThroughMovesAUserPastARangeInOneAuditedStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq, gap_since) VALUES (7, 2, now());
		INSERT INTO notify.notifications (user_id, seq, status, attempts) VALUES
			(7, 1, 'sent', 1), (7, 2, 'sent', 1), (7, 6, 'pending', 0), (7, 8, 'pending', 0)`)
	require.NoError(t, err)
	auth := "Bearer " + testerToken
	skip := func(body string) (int, map[string]any) {
		return e.do(t, http.MethodPost, "/v1/gate/7/skip-through", auth, body)
	}

	st, _ := e.do(t, http.MethodPost, "/v1/gate/7/skip-through", "", `{"through":7,"reason":"x"}`)
	require.Equal(t, http.StatusUnauthorized, st)
	st, v := skip(`{"reason":"x"}`)
	require.Equal(t, http.StatusBadRequest, st, "through is required: %v", v)
	st, v = skip(`{"through":2,"reason":"x"}`)
	require.Equal(t, http.StatusConflict, st, "2 is finished: %v", v)
	st, v = skip(`{"through":8,"reason":"x"}`)
	require.Equal(t, http.StatusConflict, st, "nothing waits after 8: %v", v)
	st, v = skip(`{"through":100003,"reason":"x"}`)
	require.Equal(t, http.StatusConflict, st, "too long a range from where the user stands: %v", v)

	st, v = skip(`{"through":7,"reason":"older than the broker's retention after the notifier's restore, INC-31"}`)
	require.Equal(t, http.StatusOK, st, "%v", v)
	require.Equal(t, map[string]any{"user_id": 7.0, "from_seq": 3.0, "through_seq": 7.0, "skipped": 4.0, "last_seq": 5.0}, v)
	rows, err := e.pool.Query(ctx, `SELECT seq || ' ' || status FROM notify.notifications WHERE user_id = 7 ORDER BY seq`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"1 sent", "2 sent", "3 skipped_by_operator", "4 skipped_by_operator", "5 skipped_by_operator",
		"6 pending", "7 skipped_by_operator", "8 pending"}, got)

	st, v = skip(`{"through":7,"reason":"again"}`)
	require.Equal(t, http.StatusConflict, st, "nothing of 6–7 is lost any more: %v", v)

	st, v = e.do(t, http.MethodGet, "/v1/audit", "", "")
	require.Equal(t, http.StatusOK, st, "%v", v)
	items := v["items"].([]any)
	require.Len(t, items, 1, "one audit row; refusals leave none")
	a := items[0].(map[string]any)
	require.Equal(t, "skip_missing_seqs", a["action"])
	require.Equal(t, 7.0, a["seq"])
	var detail map[string]int64
	var raw []byte
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT detail FROM notify.audit WHERE action = 'skip_missing_seqs'`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &detail))
	require.Equal(t, map[string]int64{"from_seq": 3, "through_seq": 7, "skipped": 4}, detail)
}
