package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/migrations"
)

// The layout of a user id (00028): the milliseconds since 2026-01-01 UTC above 12 low bits.
const (
	userIDLowBits = 12
	maxJSSafe     = 1<<53 - 1 // Number.MAX_SAFE_INTEGER: the largest integer every JSON reader keeps exactly
)

var userIDEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestUserIDLayout: user_id_at, the layout new_user_id mints ids with, from the first
// millisecond of 2026 to the last that fits, and the ids new_user_id draws. An id is
// positive, at most 2^53 - 1, later milliseconds always give larger ids whatever the low
// bits, and the milliseconds come back out of it (id >> 12). Outside its years, or with low
// bits beyond 12, it refuses.
func TestUserIDLayout(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	at := func(tm time.Time, low int) (int64, error) {
		var id int64
		err := pool.QueryRow(ctx, `SELECT user_id_at($1, $2)`, tm, low).Scan(&id)
		return id, err
	}
	last := userIDEpoch.Add(time.Duration(1<<41-1) * time.Millisecond)
	require.Equal(t, "2095-09-07T15:47:35.551Z", last.Format(time.RFC3339Nano))
	for _, c := range []struct {
		at   time.Time
		low  int
		want int64
	}{
		{userIDEpoch.Add(time.Millisecond), 0, 1 << userIDLowBits},
		{userIDEpoch.Add(time.Millisecond + 999*time.Microsecond), 4095, 2<<userIDLowBits - 1},
		{userIDEpoch.Add(2 * time.Millisecond), 0, 2 << userIDLowBits},
		{time.Date(2026, 12, 5, 6, 20, 0, 0, time.UTC), 7, 29_226_000_000<<userIDLowBits | 7},
		{last, 4095, maxJSSafe},
	} {
		id, err := at(c.at, c.low)
		require.NoError(t, err, c.at)
		require.Equal(t, c.want, id, c.at)
		require.Equal(t, c.at.Truncate(time.Millisecond), userIDEpoch.Add(time.Duration(id>>userIDLowBits)*time.Millisecond), "the time comes back out of %d", id)
		require.Equal(t, id, int64(float64(id)), "%d is exact as a JavaScript number", id)
	}

	// Later is larger: the smallest id a millisecond, an hour or a year later is above the
	// largest of now, at 64 times spread over the whole range.
	span := last.Sub(userIDEpoch) - 366*24*time.Hour
	for i := range 64 {
		tm := userIDEpoch.Add(time.Millisecond + span/63*time.Duration(i))
		for _, later := range []time.Duration{time.Millisecond, time.Hour, 365 * 24 * time.Hour} {
			hi, err := at(tm, 4095)
			require.NoError(t, err)
			lo, err := at(tm.Add(later), 0)
			require.NoError(t, err)
			require.Less(t, hi, lo, "%s, then %s later", tm, later)
		}
	}

	for _, c := range []struct {
		at   time.Time
		low  int
		code string
	}{
		{userIDEpoch, 0, pgerrcode.DatetimeFieldOverflow},                    // its first millisecond would give 0, no id
		{userIDEpoch.Add(-time.Hour), 0, pgerrcode.DatetimeFieldOverflow},    // a clock set back before 2026
		{last.Add(time.Millisecond), 0, pgerrcode.DatetimeFieldOverflow},     // beyond 2^53 - 1
		{userIDEpoch.Add(time.Hour), -1, pgerrcode.NumericValueOutOfRange},   // low bits below 0
		{userIDEpoch.Add(time.Hour), 4096, pgerrcode.NumericValueOutOfRange}, // a 13th low bit
		{time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC), 0, pgerrcode.DatetimeFieldOverflow},
	} {
		_, err := at(c.at, c.low)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, "%s, %d", c.at, c.low)
		require.Equal(t, c.code, pgErr.Code, "%s, %d: %v", c.at, c.low, err)
	}

	// new_user_id: ids of the clock's milliseconds while it ran, distinct however many a
	// statement draws at once.
	var before, after time.Time
	var ids []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	rows, err := pool.Query(ctx, `SELECT new_user_id() FROM generate_series(1, 5000)`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&after))
	for _, id := range ids {
		minted := userIDEpoch.Add(time.Duration(id>>userIDLowBits) * time.Millisecond)
		require.False(t, minted.Before(before.Truncate(time.Millisecond)) || minted.After(after), "id %d minted at %s, outside [%s, %s]", id, minted, before, after)
		require.LessOrEqual(t, id, int64(maxJSSafe))
	}
}

// TestUserIDsFromTheClockKeepTheOldOnes: 00028 gives new users ids of the clock, keeps the
// ids of the users already there, and refuses none of theirs; many users inserted by one
// statement get distinct ids. Down brings the sequence back after the largest id, so it
// gives no id twice among the users that exist; up again, the clock's ids again.
func TestUserIDsFromTheClockKeepTheOldOnes(t *testing.T) {
	t.Parallel()
	pool, p := migrated(t, migrations.Wallet)
	ctx := context.Background()
	insert := func(n int) []int64 {
		t.Helper()
		rows, err := pool.Query(ctx, `WITH u AS (INSERT INTO users (name, phone) SELECT 'user ' || g, '+8613800138000' FROM generate_series(1, $1) g RETURNING id)
			INSERT INTO wallets (user_id) SELECT id FROM u RETURNING user_id`, n)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		require.Len(t, ids, n)
		return ids
	}
	sequence := func() bool {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass('users_id_seq') IS NOT NULL`).Scan(&exists))
		return exists
	}
	fromClock := func(ids []int64) {
		t.Helper()
		for _, id := range ids {
			minted := userIDEpoch.Add(time.Duration(id>>userIDLowBits) * time.Millisecond)
			require.WithinDuration(t, time.Now(), minted, time.Hour, "id %d is not of the clock", id)
		}
	}

	_, err := p.DownTo(ctx, 27)
	require.NoError(t, err)
	require.True(t, sequence())
	old := insert(3)
	require.Equal(t, []int64{1, 2, 3}, old, "before 00028, the sequence's ids")

	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
	require.False(t, sequence(), "the sequence is gone: nothing rewinds ids any more")
	var kept []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM users`).Scan(&kept))
	require.Equal(t, old, kept, "the users already there keep their ids")
	burst := insert(3000)
	fromClock(burst)
	distinct := map[int64]bool{}
	for _, id := range burst {
		distinct[id] = true
	}
	require.Len(t, distinct, len(burst), "one statement's users each get an id of their own")

	_, err = p.DownTo(ctx, 27)
	require.NoError(t, err)
	var largest int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) FROM users`).Scan(&largest))
	require.Equal(t, []int64{largest + 1}, insert(1), "down: the sequence goes on after the largest id")
	_, err = p.Up(ctx)
	require.NoError(t, err)
	requireNewest(t, p)
	fromClock(insert(1))
}
