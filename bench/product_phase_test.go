package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// outboxFixture writes a user with events of seqs 1..n and the SMS of the seqs in sent, and
// returns the events' ids by seq.
func outboxFixture(ctx context.Context, t *testing.T, db *pgxpool.Pool, n int, sent ...int) map[int]int64 {
	t.Helper()
	var user int64
	require.NoError(t, db.QueryRow(ctx, `INSERT INTO users (name, phone) VALUES ('probe', '+8613800000001') RETURNING id`).Scan(&user))
	_, err := db.Exec(ctx, `INSERT INTO wallets (user_id) VALUES ($1)`, user)
	require.NoError(t, err)
	ids := map[int]int64{}
	for seq := 1; seq <= n; seq++ {
		var id int64
		require.NoError(t, db.QueryRow(ctx, `INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
			VALUES ($1, $2, 'deposit', 100, 'CNY', $3, 1, '+8613800000001', 'en') RETURNING id`, user, seq, 100*seq).Scan(&id))
		ids[seq] = id
	}
	for _, seq := range sent {
		sendSMS(ctx, t, db, user, seq)
	}
	return ids
}

func sendSMS(ctx context.Context, t *testing.T, db *pgxpool.Pool, user int64, seq int) {
	t.Helper()
	_, err := db.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text) VALUES ($1, $2, '+8613800000001', 'x')`, user, seq)
	require.NoError(t, err)
}

func TestDrainProbesWalkTheOutboxFromACursor(t *testing.T) {
	t.Parallel()
	admin, url := testdb.New(t)
	ctx := context.Background()
	ids := outboxFixture(ctx, t, admin, 4, 1, 3)
	db, err := newProbePool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	pr := &productRun{db: db}

	last := pr.lastEventID(ctx)
	require.Equal(t, ids[4], last)
	first, err := pr.firstUnsent(ctx, 0, last)
	require.NoError(t, err)
	require.Equal(t, ids[2], first)

	// Seq 2 and 4 lack their SMS: the cursor stops before 2, and the deadline ends the wait.
	cursor, ok := pr.drained(ctx, 0, last, time.Now().Add(50*time.Millisecond))
	require.False(t, ok)
	require.Equal(t, ids[2]-1, cursor)
	var user int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT user_id FROM wallet_events WHERE id = $1`, ids[1]).Scan(&user))
	sendSMS(ctx, t, admin, user, 2)
	cursor, ok = pr.drained(ctx, cursor, last, time.Now().Add(50*time.Millisecond))
	require.False(t, ok)
	require.Equal(t, ids[4]-1, cursor)
	require.Equal(t, int64(1), pr.quiet(ctx, 0))

	// The bound leaves later events out; once every SMS is in, the wait ends at once.
	cursor, ok = pr.drained(ctx, 0, ids[3], time.Now())
	require.True(t, ok)
	require.Equal(t, ids[3], cursor)
	sendSMS(ctx, t, admin, user, 4)
	require.Zero(t, pr.quiet(ctx, time.Minute))
}

func TestEveryProbeIsOneTransactionOfTheDatabase(t *testing.T) {
	t.Parallel()
	_, url := testdb.New(t)
	ctx := context.Background()
	db, err := newProbePool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	// The counts are read from another database, so that reading them adds none.
	other, err := pgxpool.New(ctx, testenv.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(other.Close)
	name, err := dbName(url)
	require.NoError(t, err)
	// pg_stat_force_next_flush makes the probe connection publish its counts, that
	// statement's own transaction included, before it answers.
	flushed := func() int64 {
		_, err := db.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, other.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, name).Scan(&n))
		return n
	}
	pr := &productRun{db: db, meter: &cpuMeter{}}
	c0 := flushed()
	for range 3 {
		s := pr.snapshot(ctx)
		require.NotEmpty(t, s.lsn)
		_, _ = pr.drained(ctx, 0, s.lastID, time.Now())
	}
	pr.lastEventID(ctx)
	probes := pr.probes.Load()
	require.Equal(t, int64(7), probes)
	require.Equal(t, probes+1, flushed()-c0)
	// A ping (of a connection idle for over a second, by default) would be one more.
	require.False(t, db.Config().ShouldPing(ctx, pgxpool.ShouldPingParams{IdleDuration: time.Hour}))
}
