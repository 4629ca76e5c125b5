package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// onePool returns a pool of one connection on a fresh database holding one row in table
// locks, so every use of the pool is the same connection, and a second connection of its own
// to look from outside.
func onePool(t *testing.T) (*pgxpool.Pool, *pgx.Conn) {
	t.Helper()
	_, dbURL := testdb.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Close waits for every connection to come back: a leaked one would hang the test
		// instead of failing it.
		if n := pool.Stat().AcquiredConns(); n > 0 {
			t.Errorf("%d connection(s) never given back to the pool; leaving it open", n)
			return
		}
		pool.Close()
	})
	_, err = pool.Exec(ctx, `CREATE TABLE locks (id int PRIMARY KEY, note text NOT NULL DEFAULT '');
		INSERT INTO locks (id) VALUES (1)`)
	require.NoError(t, err)
	other, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	return pool, other
}

// lockRow locks the table's row in tx, as a store does before changing it.
func lockRow(ctx context.Context, t *testing.T, tx pgx.Tx) {
	var id int
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM locks WHERE id = 1 FOR UPDATE`).Scan(&id))
}

// requireClean checks, after WithTx returned or panicked: the row lock is free (another
// transaction takes it with NOWAIT, which fails at once if anyone holds it), the pool's one
// connection was given back, is out of any transaction, and is the same connection (the
// rollback ran; pgx did not have to close it).
func requireClean(t *testing.T, pool *pgxpool.Pool, other *pgx.Conn, pid uint32) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, other, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT id FROM locks WHERE id = 1 FOR UPDATE NOWAIT`)
		return err
	}), "the row is lockable at once")
	require.Zero(t, pool.Stat().AcquiredConns(), "the connection went back to the pool")
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus(), "the pooled connection is not in a transaction")
	require.Equal(t, pid, c.Conn().PgConn().PID(), "the same connection, rolled back rather than closed")
}

// backendPID is the server process of the pool's one connection.
func backendPID(t *testing.T, pool *pgxpool.Pool) uint32 {
	t.Helper()
	c, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer c.Release()
	return c.Conn().PgConn().PID()
}

func TestWithTxCommitsWhatTheClosureDid(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	ctx := context.Background()
	pid := backendPID(t, pool)
	require.NoError(t, pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		lockRow(ctx, t, tx)
		_, err := tx.Exec(ctx, `UPDATE locks SET note = 'committed' WHERE id = 1`)
		return err
	}))
	var note string
	require.NoError(t, other.QueryRow(ctx, `SELECT note FROM locks WHERE id = 1`).Scan(&note))
	require.Equal(t, "committed", note)
	requireClean(t, pool, other, pid)
}

func TestWithTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	ctx := context.Background()
	pid := backendPID(t, pool)
	refused := errors.New("refused")
	err := pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		lockRow(ctx, t, tx)
		if _, err := tx.Exec(ctx, `UPDATE locks SET note = 'rolled back' WHERE id = 1`); err != nil {
			return err
		}
		return fmt.Errorf("deciding: %w", refused)
	})
	require.ErrorIs(t, err, refused, "the closure's error, as it was")
	var note string
	require.NoError(t, other.QueryRow(ctx, `SELECT note FROM locks WHERE id = 1`).Scan(&note))
	require.Empty(t, note, "nothing was committed")
	requireClean(t, pool, other, pid)
}

// A panic inside the closure rolls the transaction back and goes on; before, the helper
// rolled back only when the closure returned an error, and a panic recovered further up
// left the connection checked out, holding the row's lock until the process ended.
func TestWithTxRollsBackOnPanicAndPanicsOn(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	ctx := context.Background()
	pid := backendPID(t, pool)
	require.PanicsWithValue(t, "sender exploded", func() {
		_ = pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
			lockRow(ctx, t, tx)
			panic("sender exploded")
		})
	})
	requireClean(t, pool, other, pid)
}

// A closure whose context was cancelled (the request went away) is rolled back all the
// same, on a context of the helper's own: the lock is released at once and the connection
// survives.
func TestWithTxRollsBackWhenTheContextIsCancelled(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	pid := backendPID(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	err := pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		lockRow(ctx, t, tx)
		cancel()
		return ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	requireClean(t, pool, other, pid)
}

func TestSQLStateChecks(t *testing.T) {
	t.Parallel()
	pool, _ := onePool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO locks (id) VALUES (1)`)
	require.Error(t, err)
	wrapped := fmt.Errorf("inserting: %w", err)
	require.Equal(t, pgerrcode.UniqueViolation, pg.Code(wrapped))
	require.True(t, pg.IsCode(wrapped, pgerrcode.CheckViolation, pgerrcode.UniqueViolation))
	require.False(t, pg.IsCode(wrapped, pgerrcode.CheckViolation))
	require.True(t, pg.IsViolation(wrapped, pgerrcode.UniqueViolation, "locks_pkey"))
	require.True(t, pg.IsViolation(wrapped, pgerrcode.UniqueViolation, ""))
	require.False(t, pg.IsViolation(wrapped, pgerrcode.UniqueViolation, "other_pkey"))
	require.False(t, pg.IsViolation(wrapped, pgerrcode.ForeignKeyViolation, "locks_pkey"))
	require.Empty(t, pg.Code(errors.New("not from Postgres")))
	require.False(t, pg.IsCode(nil, pgerrcode.UniqueViolation))
}

// A statement stuck behind a lock that a stalled peer holds is cut off by the pool's
// statement timeout, and gives its connection back; a session a stalled client leaves idle
// inside a transaction is ended by the idle-in-transaction timeout, releasing its locks.
func TestTimeoutsCutOffAHungStatementAndAnIdleTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 2, StatementTimeout: 300 * time.Millisecond, IdleInTxTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `CREATE TABLE held (id int PRIMARY KEY); INSERT INTO held VALUES (1)`)
	require.NoError(t, err)

	// The stalled peer: a connection of its own, outside the pool's settings, holding the row.
	peer, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer peer.Close(ctx) //nolint:errcheck // the test's own connection
	tx, err := peer.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT * FROM held WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)

	began := time.Now()
	_, err = pool.Exec(ctx, `UPDATE held SET id = 1 WHERE id = 1`)
	require.True(t, pg.IsCode(err, pgerrcode.QueryCanceled), "cut off by statement_timeout, got %v", err)
	require.Less(t, time.Since(began), 5*time.Second)
	require.NoError(t, tx.Rollback(ctx))

	// A pool connection left idle in a transaction is ended by the server.
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	ptx, err := c.Begin(ctx)
	require.NoError(t, err)
	_, err = ptx.Exec(ctx, `SELECT * FROM held WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)
	wait.Until(t, 10*time.Second, "the idle session's lock to go", func() bool {
		// The lock is gone once the server ended the idle session.
		var n int
		err := peer.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'held' AND l.pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n == 0
	})
	_, err = ptx.Exec(ctx, `SELECT 1`)
	require.Error(t, err, "the session was ended")
	c.Release()
}

// TestAStatementTheClientGaveUpOnEndsOnTheServerWithinItsBounds is why the gate's records run
// in bounded transactions. A transaction locks one row and then waits for another that a
// peer holds; its client gives up after 300 ms, and its cancel request is lost (the server
// drops a cancel that lands between protocol messages, as happens on a loaded machine;
// testdb.LosingCancels loses every one). Unbounded, the backend keeps waiting after its
// client returned, and keeps the row it locked: whatever waits for that row waits for the
// peer. Bounded by the client's deadline (pg.UntilDeadline), the server ends it by itself
// and the row comes free.
func TestAStatementTheClientGaveUpOnEndsOnTheServerWithinItsBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	pool := testdb.LosingCancels(t, dbURL, 4)
	_, err := pool.Exec(ctx, `CREATE TABLE held (id int PRIMARY KEY); INSERT INTO held VALUES (1), (2), (3)`)
	require.NoError(t, err)
	peer, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer peer.Close(ctx) //nolint:errcheck // the test's own connection
	blocker, err := peer.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
	_, err = blocker.Exec(ctx, `SELECT * FROM held WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)

	// lockable reports whether row id can be locked at once by a transaction of its own.
	lockable := func(id int) bool {
		c, err := pgx.Connect(ctx, dbURL)
		require.NoError(t, err)
		defer c.Close(ctx) //nolint:errcheck // the test's own connection
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT * FROM held WHERE id = $1 FOR UPDATE NOWAIT`, id)
			return err
		})
		if err != nil {
			require.True(t, pg.IsCode(err, pgerrcode.LockNotAvailable), "%v", err)
		}
		return err == nil
	}
	// hang locks row own, then waits for row 1 until the client gives up.
	hang := func(own int, run func(context.Context, pg.Beginner, func(pgx.Tx) error) error) {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := run(cctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(cctx, `SELECT * FROM held WHERE id = $1 FOR UPDATE`, own); err != nil {
				return err
			}
			_, err := tx.Exec(cctx, `UPDATE held SET id = 1 WHERE id = 1`)
			return err
		})
		require.Error(t, err)
	}

	hang(2, pg.WithTx)
	require.False(t, lockable(2), "unbounded, the backend still holds its row after its client gave up")

	hang(3, func(c context.Context, db pg.Beginner, fn func(pgx.Tx) error) error {
		return pg.WithBoundedTx(c, db, pg.UntilDeadline(c), fn)
	})
	wait.Until(t, 10*time.Second, "the bounded transaction's row to come free", func() bool { return lockable(3) })
	require.False(t, lockable(2), "the unbounded one still waits for the peer")

	require.NoError(t, blocker.Rollback(ctx))
	wait.Until(t, 10*time.Second, "the unbounded transaction's row to come free once the peer let go", func() bool { return lockable(2) })
}

func TestBoundsAreSetOnTheTransactionOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 1})
	require.NoError(t, err)
	defer pool.Close()
	show := func(q pg.Querier) (lock, stmt, idle string) {
		require.NoError(t, q.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
			current_setting('idle_in_transaction_session_timeout')`).Scan(&lock, &stmt, &idle))
		return lock, stmt, idle
	}
	require.NoError(t, pg.WithBoundedTx(ctx, pool, pg.Bounds{Lock: 250 * time.Millisecond, Statement: 2 * time.Second}, func(tx pgx.Tx) error {
		lock, stmt, idle := show(tx)
		require.Equal(t, []string{"250ms", "2s", "0"}, []string{lock, stmt, idle})
		return nil
	}))
	lock, stmt, idle := show(pool)
	require.Equal(t, []string{"0", "0", "0"}, []string{lock, stmt, idle}, "the pool's next user sees the session's own settings")

	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	b := pg.UntilDeadline(dctx)
	require.InDelta(t, time.Minute, b.Lock, float64(time.Second))
	require.Equal(t, b.Lock, b.Statement)
	require.Equal(t, b.Lock, b.IdleInTx)
	require.Equal(t, pg.Bounds{}, pg.UntilDeadline(ctx))
}

// TwoTrips: the first batch's statements run in the transaction, and what they read is in
// hand when the second batch is queued; both batches' writes commit together, under the
// row lock the first took.
func TestTwoTripsCommitsWhatBothBatchesDid(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	ctx := context.Background()
	pid := backendPID(t, pool)
	var id int
	var inTx bool
	require.NoError(t, pg.TwoTrips(ctx, pool, pg.Bounds{}, func(b *pgx.Batch) {
		b.Queue(`SELECT id, now() = statement_timestamp() FROM locks WHERE id = 1 FOR UPDATE`).QueryRow(func(r pgx.Row) error {
			var single bool
			err := r.Scan(&id, &single)
			inTx = !single // in a transaction begun before this statement
			return err
		})
		b.Queue(`UPDATE locks SET note = 'first' WHERE id = 1`)
	}, func(b *pgx.Batch) error {
		require.Equal(t, 1, id, "the first batch's rows are read before the second is queued")
		b.Queue(`UPDATE locks SET note = note || ', second' WHERE id = $1`, id)
		return nil
	}))
	require.True(t, inTx, "the first batch ran inside the transaction")
	var note string
	require.NoError(t, other.QueryRow(ctx, `SELECT note FROM locks WHERE id = 1`).Scan(&note))
	require.Equal(t, "first, second", note)
	requireClean(t, pool, other, pid)
}

// TwoTrips rolls back what the first batch wrote when the second batch fails on the server,
// when second refuses, and when the first batch fails; each time the connection goes back
// to the pool clean, rolled back rather than closed.
func TestTwoTripsRollsBackOnAnyError(t *testing.T) {
	t.Parallel()
	pool, other := onePool(t)
	ctx := context.Background()
	pid := backendPID(t, pool)
	write := func(b *pgx.Batch) {
		b.Queue(`SELECT id FROM locks WHERE id = 1 FOR UPDATE`)
		b.Queue(`UPDATE locks SET note = 'rolled back' WHERE id = 1`)
	}
	refused := errors.New("refused")
	for name, run := range map[string]func() error{
		"the second batch fails": func() error {
			return pg.TwoTrips(ctx, pool, pg.Bounds{}, write, func(b *pgx.Batch) error {
				b.Queue(`SELECT 1 / 0`)
				return nil
			})
		},
		"second refuses": func() error {
			return pg.TwoTrips(ctx, pool, pg.Bounds{}, write, func(*pgx.Batch) error { return refused })
		},
		"the first batch fails": func() error {
			return pg.TwoTrips(ctx, pool, pg.Bounds{}, func(b *pgx.Batch) {
				write(b)
				b.Queue(`SELECT 1 / 0`)
			}, func(*pgx.Batch) error { t.Error("second ran after the first batch failed"); return nil })
		},
	} {
		err := run()
		require.Error(t, err, name)
		if name == "second refuses" {
			require.ErrorIs(t, err, refused)
		} else {
			require.Equal(t, "22012", pg.Code(err), name)
		}
		var note string
		require.NoError(t, other.QueryRow(ctx, `SELECT note FROM locks WHERE id = 1`).Scan(&note))
		require.Empty(t, note, "%s: nothing was committed", name)
		requireClean(t, pool, other, pid)
	}
}

// TwoTrips sets its bounds on the transaction, as WithBoundedTx does, and on it only.
func TestTwoTripsSetsItsBoundsOnTheTransactionOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 1})
	require.NoError(t, err)
	defer pool.Close()
	var got []string
	read := func(b *pgx.Batch) {
		b.Queue(`SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
			current_setting('idle_in_transaction_session_timeout')`).QueryRow(func(r pgx.Row) error {
			var lock, stmt, idle string
			err := r.Scan(&lock, &stmt, &idle)
			got = []string{lock, stmt, idle}
			return err
		})
	}
	none := func(*pgx.Batch) error { return nil }
	require.NoError(t, pg.TwoTrips(ctx, pool, pg.Bounds{Lock: 250 * time.Millisecond, Statement: 2 * time.Second}, read, none))
	require.Equal(t, []string{"250ms", "2s", "0"}, got)
	require.NoError(t, pg.TwoTrips(ctx, pool, pg.Bounds{}, read, none))
	require.Equal(t, []string{"0", "0", "0"}, got, "the pool's next user sees the session's own settings")
}

// A pool opened with IndexedReads reads through an index where the planner, costing a table
// by its few live rows, would scan all of its pages; one opened without still scans.
func TestIndexedReadsKeepThePlannerOnTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	plain, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 1})
	require.NoError(t, err)
	defer plain.Close()
	indexed, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 1, IndexedReads: true})
	require.NoError(t, err)
	defer indexed.Close()
	_, err = plain.Exec(ctx, `CREATE TABLE wakes (id bigint PRIMARY KEY, user_id bigint NOT NULL);
		CREATE INDEX wakes_user ON wakes (user_id);
		INSERT INTO wakes SELECT g, g % 7 FROM generate_series(1, 40) g;
		ANALYZE wakes`)
	require.NoError(t, err)
	plan := func(p pg.Querier) string {
		return explain(t, p, `EXPLAIN DELETE FROM wakes WHERE user_id = ANY($1)`, []int64{3, 5})
	}
	require.Contains(t, plan(plain), "Seq Scan on wakes", "the planner scans a one-page table")
	p := plan(indexed)
	require.NotContains(t, p, "Seq Scan", p)
	require.Contains(t, p, "wakes_user", p)
	var v string
	require.NoError(t, indexed.QueryRow(ctx, `SHOW enable_seqscan`).Scan(&v))
	require.Equal(t, "off", v)
}

// A pool opened with GenericPlans plans a prepared statement once, without its parameters'
// values; one opened without plans it for the values it is given.
func TestGenericPlansPlanAPreparedStatementOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dbURL := testdb.New(t)
	plan := func(o pg.Options) string {
		pool, err := pg.Open(ctx, dbURL, o)
		require.NoError(t, err)
		defer pool.Close()
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS held (id bigint PRIMARY KEY);
			PREPARE one (bigint[]) AS SELECT id FROM held WHERE id = ANY($1)`)
		require.NoError(t, err)
		return explain(t, conn, `EXPLAIN EXECUTE one('{7}')`)
	}
	require.Contains(t, plan(pg.Options{MaxConns: 1}), "'{7}'", "a custom plan, made for the value")
	generic := plan(pg.Options{MaxConns: 1, GenericPlans: true})
	require.Contains(t, generic, "$1", generic)
	require.NotContains(t, generic, "'{7}'", generic)
}

// explain runs an EXPLAIN statement on q and returns its plan, a line per row.
func explain(t *testing.T, q pg.Querier, sql string, args ...any) string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
