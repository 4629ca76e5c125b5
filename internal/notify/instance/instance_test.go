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
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
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

	a := instance.New(pool, "g", "notifier-1", log)
	require.NoError(t, a.Start(ctx))
	err := instance.New(pool, "g", "notifier-1", log).Start(ctx)
	require.ErrorIs(t, err, instance.ErrTaken)
	require.Contains(t, err.Error(), `runs as "notifier-1"`)
	b := instance.New(pool, "g", "notifier-2", log)
	require.NoError(t, b.Start(ctx), "another name is free")
	c := instance.New(pool, "other-group", "notifier-1", log)
	require.NoError(t, c.Start(ctx), "the same name in another group is free")
	require.Equal(t, 3, locks())
	require.NoError(t, b.Stop(ctx))
	require.NoError(t, c.Stop(ctx))
	require.Equal(t, 1, locks())

	// The claim's session dies (as in a Postgres restart): the claim is taken again.
	old := holder()
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, old)
	require.NoError(t, err)
	wait.Until(t, 20*time.Second, "the claim to be taken again by a new session",
		func() bool { p := holder(); return p != 0 && p != old && a.Held() })
	require.Equal(t, 1, locks())
	require.ErrorIs(t, instance.New(pool, "g", "notifier-1", log).Start(ctx), instance.ErrTaken, "still exclusive after the reconnect")

	require.NoError(t, a.Stop(ctx))
	require.Equal(t, 0, locks())
	again := instance.New(pool, "g", "notifier-1", log)
	require.NoError(t, again.Start(ctx), "free once released")
	require.NoError(t, again.Stop(ctx))
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
