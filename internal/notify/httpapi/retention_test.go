package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
)

// TestAReplayOfAPrunedSMSIsGone: once retention has pruned a finished dead letter's inbox row,
// replaying it is refused with 410 and a JSON error saying it was pruned; a seq the user never
// reached is still 404.
func TestAReplayOfAPrunedSMSIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO notify.progress (user_id, last_seq) VALUES (1, 3), (2, 1);
		UPDATE notify.notifications SET dlq_published_at = finished_at WHERE status = 'dead_lettered'`)
	require.NoError(t, err)
	n, err := gate.NewStore(e.pool).PruneInbox(ctx, time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "the seeded rows finished long ago")

	auth := "Bearer " + testerToken
	st, v := e.do(t, http.MethodPost, "/v1/dead-letters/1/2/replay", auth, `{"reason":"customer asked"}`)
	require.Equal(t, http.StatusGone, st, "%v", v)
	require.Equal(t, "gone", errCode(v))
	require.Contains(t, v["error"].(map[string]any)["message"], "pruned")
	st, v = e.do(t, http.MethodPost, "/v1/dead-letters/1/9/replay", auth, `{"reason":"r"}`)
	require.Equal(t, http.StatusNotFound, st, "never reached: %v", v)
}
