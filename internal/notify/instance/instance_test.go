package instance_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/notify/instance"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// A stable consumer name can be held by one live process only; it is freed when the process
// releases it or its session dies, and taken again after the database comes back.
func TestTakeIsExclusiveAndSurvivesLostSessions(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const advisory = `FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	locks := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) `+advisory).Scan(&n))
		return n
	}
	holder := func() int {
		var pid int
		require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(max(pid), 0) `+advisory).Scan(&pid))
		return pid
	}

	a, err := instance.Take(ctx, pool, "g", "notifier-1", log)
	require.NoError(t, err)
	_, err = instance.Take(ctx, pool, "g", "notifier-1", log)
	require.ErrorIs(t, err, instance.ErrTaken)
	require.Contains(t, err.Error(), `runs as "notifier-1"`)
	b, err := instance.Take(ctx, pool, "g", "notifier-2", log)
	require.NoError(t, err, "another name is free")
	c, err := instance.Take(ctx, pool, "other-group", "notifier-1", log)
	require.NoError(t, err, "the same name in another group is free")
	require.Equal(t, 3, locks())
	b.Release()
	c.Release()
	require.Equal(t, 1, locks())

	// The claim's session dies (as in a Postgres restart): the claim is taken again.
	old := holder()
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, old)
	require.NoError(t, err)
	wait.Until(t, 20*time.Second, "the claim to be taken again by a new session",
		func() bool { p := holder(); return p != 0 && p != old && a.Held() })
	require.Equal(t, 1, locks())
	_, err = instance.Take(ctx, pool, "g", "notifier-1", log)
	require.ErrorIs(t, err, instance.ErrTaken, "still exclusive after the reconnect")

	a.Release()
	require.Equal(t, 0, locks())
	again, err := instance.Take(ctx, pool, "g", "notifier-1", log)
	require.NoError(t, err, "free once released")
	again.Release()
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
