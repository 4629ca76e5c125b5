package saga_test

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// blocker is a saga kind whose only step updates the gate row: its commit waits while the
// test holds that row locked, and holds the engine's one group meanwhile.
func blocker() saga.Definition {
	return fast("blocker", saga.Step{Name: "pass", Do: saga.Local(func(_ *saga.Instance, b *pgx.Batch) saga.Outcome {
		b.Queue(`UPDATE gate SET n = n + 1 WHERE id = 1`)
		return saga.Done()
	})})
}

// twoEffects is a saga kind of two local steps, the second writing the effect named last
// ("refused" makes it fail, and the first is compensated in the next commit).
func twoEffects(kind, last string) saga.Definition {
	return fast(kind,
		saga.Step{Name: "debit", Do: saga.Local(effect("debit")), Compensate: saga.Local(effect("reversal"))},
		saga.Step{Name: "credit", Do: saga.Local(effect(last))},
	)
}

// withGate adds to an effects database the gate row the blocker's commit updates.
func withGate(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := withEffects(t)
	exec(t, pool, `CREATE TABLE gate (id int PRIMARY KEY, n int NOT NULL)`)
	exec(t, pool, `INSERT INTO gate VALUES (1, 0)`)
	return pool
}

// holdGroup starts a blocker saga on e whose commit waits for the gate row, which the test
// holds locked, so that the commits sent meanwhile queue for a group (e writes one group at
// a time). release lets the blocker commit, and waits for its Start.
func holdGroup(t *testing.T, pool *pgxpool.Pool, e *saga.Engine) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM gate WHERE id = 1 FOR UPDATE`)
	require.NoError(t, err)
	// On a failure, let the blocker through before the pool closes.
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	started := make(chan error, 1)
	go func() {
		_, err := e.Start(ctx, "blocker", nil, nil)
		started <- err
	}()
	wait.Until(t, 10*time.Second, "the blocker's commit to wait for the gate row", func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE gate%'`) == 1
	})
	return func() {
		t.Helper()
		require.NoError(t, tx.Rollback(ctx))
		select {
		case err := <-started:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for the blocker's commit")
		}
	}
}

// waitQueued waits until n commits of e wait for a group.
func waitQueued(t *testing.T, e *saga.Engine, queued *wait.Signal, n int) {
	t.Helper()
	wait.On(t, 10*time.Second, "queued commits", queued.Next, func() bool { return saga.QueuedCommits(e) == n })
}

// startGrouped starts a saga of each kind at once while e's only group is held, so that
// their first commits queue behind it and are written as one group, and returns each one's
// snapshot and error, in the order of kinds.
func startGrouped(t *testing.T, pool *pgxpool.Pool, e *saga.Engine, queued *wait.Signal, kinds ...string) (snaps []saga.Snapshot, errs []error, before saga.CommitStats) {
	t.Helper()
	release := holdGroup(t, pool, e)
	before = e.CommitStats()
	snaps, errs = make([]saga.Snapshot, len(kinds)), make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, kind := range kinds {
		wg.Go(func() {
			st, err := e.Start(context.Background(), kind, nil, nil)
			if errs[i] = err; err == nil {
				snaps[i] = st.Snapshot()
			}
		})
	}
	waitQueued(t, e, queued, len(kinds))
	release()
	wg.Wait()
	return snaps, errs, before
}

// statsSince is what e counted since before.
func statsSince(e *saga.Engine, before saga.CommitStats) saga.CommitStats {
	now := e.CommitStats()
	return saga.CommitStats{Commits: now.Commits - before.Commits, Groups: now.Groups - before.Groups,
		Transactions: now.Transactions - before.Transactions}
}

// Many concurrent requests' commits share transactions, and every saga ends as alone.
func TestConcurrentCommitsShareTransactions(t *testing.T) {
	t.Parallel()
	pool := withEffects(t)
	e := newEngine(t, pool, saga.Options{}, fast("order",
		saga.Step{Name: "reserve", Do: saga.Local(effect("reserve"))},
		saga.Step{Name: "charge", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome { return saga.Done() })},
		saga.Step{Name: "confirm", Do: saga.Local(effect("confirm"))},
	))
	const n = 50
	go1 := make(chan struct{})
	snaps := make([]saga.Snapshot, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-go1
			st, err := e.Start(context.Background(), "order", nil, nil)
			if err != nil {
				errs[i] = err
				return
			}
			snaps[i], errs[i] = e.Drive(context.Background(), st)
		})
	}
	close(go1)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, saga.Completed, snaps[i].State)
		require.Equal(t, []string{"reserve/forward/done/1", "charge/forward/done/1", "confirm/forward/done/1"}, statuses(snaps[i]))
		requireStored(t, e, snaps[i])
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, snaps[i].ID))
	}
	st := e.CommitStats()
	require.Equal(t, int64(2*n), st.Commits, "two commits a saga")
	require.Equal(t, st.Groups, st.Transactions, "no member failed: one transaction a group")
	require.Less(t, st.Groups, st.Commits, "concurrent commits shared transactions")
	t.Logf("%d commits in %d groups (%.1f a group), %d transactions", st.Commits, st.Groups, float64(st.Commits)/float64(st.Groups), st.Transactions)
}

// A member whose local step the database refuses fails and is compensated exactly as alone,
// while the others of its group commit.
func TestRefusedMemberDoesNotFailItsGroup(t *testing.T) {
	t.Parallel()
	pool := withGate(t)
	e := newEngine(t, pool, saga.Options{CommitGroups: 1}, blocker(), twoEffects("transfer", "credit"), twoEffects("refused", "refused"))
	var queued wait.Signal
	saga.OnCommitQueued(e, queued.Raise)

	alone := start(t, e, "refused", nil).Snapshot()
	require.Equal(t, saga.Compensated, alone.State)

	kinds := []string{"transfer", "refused", "transfer"}
	snaps, errs, before := startGrouped(t, pool, e, &queued, kinds...)
	for _, err := range errs {
		require.NoError(t, err)
	}

	require.Equal(t, saga.CommitStats{Commits: 3 + 1, Groups: 1 + 1, Transactions: 2 + 1}, statsSince(e, before),
		"one group of the three, sent again without the refused one; then its compensation alone")
	for i, s := range snaps {
		requireStored(t, e, s)
		if kinds[i] == "refused" {
			require.Equal(t, alone.State, s.State)
			require.Equal(t, alone.Error, s.Error)
			require.Equal(t, statuses(alone), statuses(s))
			require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1 AND step IN ('debit', 'reversal')`, s.ID))
			continue
		}
		require.Equal(t, saga.Completed, s.State)
		require.Equal(t, []string{"debit/forward/done/1", "credit/forward/done/1"}, statuses(s))
		require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1 AND step IN ('debit', 'credit')`, s.ID))
	}
}

// A member whose saga another runner took over gets errMoved and writes nothing; the
// others of its group commit.
func TestMovedMemberDoesNotFailItsGroup(t *testing.T) {
	t.Parallel()
	pool := withGate(t)
	var entered atomic.Int32
	var calling wait.Signal
	answer := make(chan struct{})
	var answered sync.Once
	t.Cleanup(func() { answered.Do(func() { close(answer) }) }) // on a failure, before the pool closes
	e := newEngine(t, pool, saga.Options{CommitGroups: 1}, blocker(), fast("call",
		saga.Step{Name: "call", Do: saga.Remote(func(context.Context, string, *saga.Instance) saga.Outcome {
			entered.Add(1)
			calling.Raise()
			<-answer
			return saga.Done()
		})},
		saga.Step{Name: "confirm", Do: saga.Local(effect("confirm"))},
	))
	var queued wait.Signal
	saga.OnCommitQueued(e, queued.Raise)

	const n = 3
	started := make([]*saga.Started, n)
	for i := range n {
		started[i] = start(t, e, "call", nil)
	}
	snaps, errs := make([]saga.Snapshot, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { snaps[i], errs[i] = e.Drive(context.Background(), started[i]) })
	}
	wait.On(t, 10*time.Second, "every call", calling.Next, func() bool { return entered.Load() == n })
	moved := started[1].ID()
	exec(t, pool, `UPDATE sagas SET fence = fence + 1 WHERE id = $1`, moved) // what a recovery runner's claim does

	release := holdGroup(t, pool, e)
	before := e.CommitStats()
	answered.Do(func() { close(answer) })
	waitQueued(t, e, &queued, n)
	release()
	wg.Wait()

	require.Equal(t, saga.CommitStats{Commits: n, Groups: 1, Transactions: 2}, statsSince(e, before))
	for i, s := range snaps {
		if s.ID == moved {
			require.ErrorIs(t, errs[i], saga.ErrMoved)
			require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1`, s.ID))
			continue
		}
		require.NoError(t, errs[i])
		require.Equal(t, saga.Completed, s.State)
		requireStored(t, e, s)
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE saga_id = $1 AND step = 'confirm'`, s.ID))
	}
}

// A commit whose context ends while it waits for a group leaves the queue with the
// context's error and is never written.
func TestCancelledQueuedCommitIsNotWritten(t *testing.T) {
	t.Parallel()
	pool := withGate(t)
	e := newEngine(t, pool, saga.Options{CommitGroups: 1}, blocker(), twoEffects("transfer", "credit"))
	var queued wait.Signal
	saga.OnCommitQueued(e, queued.Raise)

	release := holdGroup(t, pool, e)
	before := e.CommitStats()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Start(ctx, "transfer", nil, nil)
		done <- err
	}()
	waitQueued(t, e, &queued, 1)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the cancelled Start")
	}
	require.Equal(t, 0, saga.QueuedCommits(e))
	release()

	require.Equal(t, saga.CommitStats{}, statsSince(e, before), "nothing but the blocker was written")
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM sagas WHERE kind = 'transfer'`))
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM effects`))
	s := start(t, e, "transfer", nil).Snapshot()
	require.Equal(t, saga.Completed, s.State, "the engine writes on")
}

// A member whose batch fails where no statement can be blamed — one that cannot be
// prepared (nothing is sent), or a deferred constraint the commit itself refuses — gets
// what it gets alone, and the others of its group commit: each is sent again alone.
func TestUnblamableFailureSendsEachMemberAlone(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]saga.LocalFunc{
		"unpreparable": func(_ *saga.Instance, b *pgx.Batch) saga.Outcome {
			b.Queue(`SELEC 1`)
			return saga.Done()
		},
		"refused at commit": func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
			b.Queue(`INSERT INTO once (saga_id) VALUES ($1)`, s.ID)
			b.Queue(`INSERT INTO once (saga_id) VALUES ($1)`, s.ID)
			return saga.Done()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := withGate(t)
			exec(t, pool, `CREATE TABLE once (saga_id bigint CONSTRAINT once_saga UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
			e := newEngine(t, pool, saga.Options{CommitGroups: 1}, blocker(), twoEffects("transfer", "credit"),
				fast("bad", saga.Step{Name: "bad", Do: saga.Local(bad)}))
			var queued wait.Signal
			saga.OnCommitQueued(e, queued.Raise)

			_, alone := e.Start(context.Background(), "bad", nil, nil)
			require.Error(t, alone)

			kinds := []string{"transfer", "bad", "transfer"}
			snaps, errs, before := startGrouped(t, pool, e, &queued, kinds...)

			require.Equal(t, saga.CommitStats{Commits: 3, Groups: 1, Transactions: 1 + 3}, statsSince(e, before))
			for i, kind := range kinds {
				if kind == "bad" {
					require.Error(t, errs[i])
					require.Equal(t, regexp.MustCompile(`saga \d+`).ReplaceAllString(alone.Error(), "saga N"),
						regexp.MustCompile(`saga \d+`).ReplaceAllString(errs[i].Error(), "saga N"), "as alone")
					continue
				}
				require.NoError(t, errs[i])
				require.Equal(t, saga.Completed, snaps[i].State)
				requireStored(t, e, snaps[i])
			}
			require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM sagas WHERE kind <> 'blocker'`), "only the two transfers")
		})
	}
}

// A member whose statement meets a serialization failure (or a deadlock, as two groups
// may) gets it, and its runner sends the commit again as it does alone; the others of the
// group commit meanwhile.
func TestTransientMemberIsSentAgainByItsRunner(t *testing.T) {
	t.Parallel()
	pool := withGate(t)
	// nextval is not rolled back: the first call fails, every later one passes.
	exec(t, pool, `CREATE SEQUENCE tries`)
	exec(t, pool, `CREATE FUNCTION flaky() RETURNS void LANGUAGE plpgsql AS $$
		BEGIN IF nextval('tries') = 1 THEN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END IF; END $$`)
	e := newEngine(t, pool, saga.Options{CommitGroups: 1}, blocker(), twoEffects("transfer", "credit"),
		fast("flaky", saga.Step{Name: "flaky", Do: saga.Local(func(s *saga.Instance, b *pgx.Batch) saga.Outcome {
			b.Queue(`SELECT flaky()`)
			return effect("flaky")(s, b)
		})}))
	var queued wait.Signal
	saga.OnCommitQueued(e, queued.Raise)

	kinds := []string{"transfer", "flaky", "transfer"}
	snaps, errs, before := startGrouped(t, pool, e, &queued, kinds...)

	require.Equal(t, saga.CommitStats{Commits: 3 + 1, Groups: 1 + 1, Transactions: 2 + 1}, statsSince(e, before),
		"one group of the three, sent again without the flaky one; then the flaky one again, alone")
	for i, s := range snaps {
		require.NoError(t, errs[i])
		require.Equal(t, saga.Completed, s.State)
		requireStored(t, e, s)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM effects WHERE step = 'flaky'`))
}
