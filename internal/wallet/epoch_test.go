package wallet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// eventEpochs returns user's events as (seq, epoch, epoch_since), in seq order.
func eventEpochs(t *testing.T, pool *pgxpool.Pool, user int64) [][3]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, epoch, epoch_since FROM wallet_events WHERE user_id = $1 ORDER BY seq`, user)
	require.NoError(t, err)
	defer rows.Close()
	var out [][3]int64
	for rows.Next() {
		var e [3]int64
		require.NoError(t, rows.Scan(&e[0], &e[1], &e[2]))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestARestoredDatabaseBeginsANewEpoch: the first check of a database records what it looks
// like and begins nothing; a check of the same database changes nothing. The database is
// then copied (a backup, restored as a new database): the first check there begins a new,
// larger epoch, once however many replicas check at once, and the user's next event is
// written in it, saying that its seq is the user's first there; the one after says the
// same first seq. An operator's new epoch (for a rewind no check can see) does the same.
func TestARestoredDatabaseBeginsANewEpoch(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	e := newEnvOn(t, pool, envOptions{})
	first, err := wallet.NewEpochs(pool).Check(e.ctx)
	require.NoError(t, err)
	require.False(t, first.Minted)
	require.False(t, first.Current.Rewound(), "the database's first epoch")
	again, err := wallet.NewEpochs(pool).Check(e.ctx)
	require.NoError(t, err)
	require.Equal(t, first.Current, again.Current)
	require.False(t, again.Minted)
	require.Equal(t, first.Now, again.Now)

	user := e.user(t)
	e.fund(t, user, 100)
	e.fund(t, user, 200)
	require.Equal(t, [][3]int64{{1, first.Current.Epoch, 1}, {2, first.Current.Epoch, 1}}, eventEpochs(t, pool, user))

	// The backup: the database as it stands, restored as a new one.
	require.NoError(t, e.eng.Recovery().Stop(context.Background()))
	pool.Close()
	restored, _ := testdb.Copy(t, dbURL)
	checks := make([]wallet.EpochCheck, 4)
	var wg sync.WaitGroup
	for i := range checks {
		wg.Go(func() {
			c, err := wallet.NewEpochs(restored).Check(context.Background())
			require.NoError(t, err)
			checks[i] = c
		})
	}
	wg.Wait()
	minted := 0
	for _, c := range checks {
		if c.Minted {
			minted++
			require.NotEqual(t, c.Was, c.Now)
		}
		require.Equal(t, checks[0].Current.Epoch, c.Current.Epoch, "every replica writes in one epoch")
	}
	require.Equal(t, 1, minted, "one new epoch, however many replicas check at once")
	next := checks[0].Current
	require.Greater(t, next.Epoch, first.Current.Epoch)
	require.True(t, next.Rewound())

	r := newEnvOn(t, restored, envOptions{})
	r.fund(t, user, 300)
	r.fund(t, user, 400)
	require.Equal(t, [][3]int64{{1, first.Current.Epoch, 1}, {2, first.Current.Epoch, 1}, {3, next.Epoch, 3}, {4, next.Epoch, 3}},
		eventEpochs(t, restored, user))

	op, err := wallet.NewEpochs(restored).Begin(r.ctx, "a file-system snapshot was put back")
	require.NoError(t, err)
	require.Greater(t, op.Epoch, next.Epoch)
	r.fund(t, user, 500)
	require.Equal(t, [3]int64{5, op.Epoch, 5}, eventEpochs(t, restored, user)[4])
	c, err := wallet.NewEpochs(restored).Check(r.ctx)
	require.NoError(t, err)
	require.False(t, c.Minted, "the operator's epoch is of this database")
	require.Equal(t, op.Epoch, c.Current.Epoch)
}

// TestWhatTheFingerprintTells: two fingerprints are of one history when every part both
// tell is equal; a server that refuses the control data to the role leaves its parts "-".
func TestWhatTheFingerprintTells(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		was, now string
		same     bool
	}{
		{"7716/00000001/16385/24601", "7716/00000001/16385/24601", true},
		{"7716/00000001/16385/24601", "7716/00000002/16385/24601", false}, // a promotion or a point-in-time recovery
		{"7716/00000001/16385/24601", "9999/00000001/16385/24601", false}, // a restore into another cluster
		{"7716/00000001/16385/24601", "7716/00000001/16390/24601", false}, // a dump restored as a new database, a copy
		{"7716/00000001/16385/24601", "7716/00000001/16385/24777", false}, // a dump restored over the database
		{"-/-/16385/24601", "7716/00000001/16385/24601", true},            // the role was granted the control data since
		{"-/-/16385/24601", "-/-/16385/24700", false},
		{"7716/00000001/16385", "7716/00000001/16385/24601", false},
	} {
		require.Equal(t, tc.same, wallet.SameDatabase(tc.was, tc.now), "%s → %s", tc.was, tc.now)
	}
}

// TestAChangeThatWaitedForAWalletStaysInItsNewEpoch: a balance change that began before a new
// epoch (its statement's snapshot sees the old one) and waited for the wallet's row lock
// behind a change written in the new epoch is written in the new epoch too, after it: a
// wallet's epoch never goes back. Written in the old epoch, with a seq past the new epoch's
// first, the notifier would take it for an event of a rewound history and set it aside,
// never sent, as a deposit racing the epoch check after a lossless failover would be.
func TestAChangeThatWaitedForAWalletStaysInItsNewEpoch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noRunner: true})
	epochs := wallet.NewEpochs(e.pool)
	first, err := epochs.Check(e.ctx)
	require.NoError(t, err)
	user := e.user(t)
	sid := e.sagaID(t, user)
	_, err = e.apply(e.ctx, wallet.Change{UserID: user, SagaID: sid, Step: "one", Amount: 100, Kind: walletevent.Deposit})
	require.NoError(t, err)

	// A holds the wallet's row lock; B's change starts (in the current epoch's snapshot) and
	// waits for it.
	a, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer a.Rollback(e.ctx) //nolint:errcheck // committed below; a failed test leaves nothing else to undo
	_, err = a.Exec(e.ctx, `SELECT 1 FROM wallets WHERE user_id = $1 FOR UPDATE`, user)
	require.NoError(t, err)
	var waitedErr error
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, waitedErr = e.apply(e.ctx, wallet.Change{UserID: user, SagaID: sid, Step: "waited", Amount: 300, Kind: walletevent.Deposit})
	}()
	// The database is the test's own: only the change can wait for a lock there.
	wait.Until(t, 30*time.Second, "the change to wait for the wallet's row lock", func() bool {
		select {
		case <-waited:
			require.FailNow(t, "the change did not wait for the lock", "%v", waitedErr)
		default:
		}
		var waiting bool
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		return waiting
	})

	// The new epoch begins, and A writes the wallet's first change in it.
	next, err := epochs.Begin(e.ctx, "a failover the check saw")
	require.NoError(t, err)
	_, err = wallet.ApplyChange(e.ctx, a, wallet.Change{UserID: user, SagaID: sid, Step: "first-new", Amount: 200, Kind: walletevent.Deposit})
	require.NoError(t, err)
	require.NoError(t, a.Commit(e.ctx))
	wait.For(t, 30*time.Second, "the waiting change to finish once the lock came free", waited)
	require.NoError(t, waitedErr)
	require.Equal(t, [][3]int64{{1, first.Current.Epoch, 1}, {2, next.Epoch, 2}, {3, next.Epoch, 2}}, eventEpochs(t, e.pool, user))
}
