// The store's statements: arrive, claim, record, and their races.

package gate

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestArriveIsIdempotentAndStartsFromABaseline: the inbox keeps one row per (user, seq);
// redeliveries and seqs a user finished already are ignored; a user first seen at seq n > 1
// in arrivals that may set a baseline starts at n, recorded as a baseline, and earlier seqs
// arriving later are not sent.
func TestArriveIsIdempotentAndStartsFromABaseline(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	r := receive(t, s, true, inbound(t, 1, 5, 100), inbound(t, 1, 6, 100), inbound(t, 1, 5, 100), inbound(t, 2, 1, 100))
	require.Equal(t, Arrived{Inserted: 3, Ignored: 1, Baselines: 1, Woken: 2}, r)
	r = receive(t, s, true, inbound(t, 1, 3, 100), inbound(t, 1, 7, 100))
	require.Equal(t, Arrived{Inserted: 1, Ignored: 1, Woken: 1}, r, "seq 3 is before user 1's baseline")
	v, err := s.View(context.Background(), 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, v.Baselines, 1)
	require.Equal(t, int64(1), v.Baselines[0].UserID)
	require.Equal(t, int64(5), v.Baselines[0].Seq)
	require.EqualValues(t, 4, v.Pending)
	require.EqualValues(t, 2, v.Due)
}

// TestOnlyAnArrivalThatMaySetABaselineStartsANewUserPastSeqOne: a user the gate has never
// seen starts at seq 1 unless the arrival of its lowest seq came with MayBaseline (and, for
// that seq arriving twice in one write, both did); one that starts at 1 keeps its later seqs
// until the earlier ones arrive, and then all of them are pending, none ignored.
func TestOnlyAnArrivalThatMaySetABaselineStartsANewUserPastSeqOne(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	flagged := func(a Arrival) Arrival { a.MayBaseline = true; return a }
	r := receive(t, s, false,
		inbound(t, 1, 5, 100),                                 // user 1: no baseline, from seq 1
		flagged(inbound(t, 2, 5, 100)), inbound(t, 2, 3, 100), // user 2: its lowest seq may not
		flagged(inbound(t, 3, 5, 100)), inbound(t, 3, 5, 100), // user 3: seq 5 once with, once without
		flagged(inbound(t, 4, 5, 100)), inbound(t, 4, 7, 100), // user 4: its lowest seq may
	)
	require.Equal(t, 1, r.Baselines, "user 4 alone")
	rows, err := pool.Query(ctx, `SELECT user_id, last_seq, COALESCE(baseline_seq, 0) FROM notify.progress ORDER BY user_id`)
	require.NoError(t, err)
	var got [][3]int64
	for rows.Next() {
		var u [3]int64
		require.NoError(t, rows.Scan(&u[0], &u[1], &u[2]))
		got = append(got, u)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, [][3]int64{{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 4, 5}}, got, "user, last seq, baseline")

	r = receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 100), inbound(t, 1, 3, 100), inbound(t, 1, 4, 100),
		flagged(inbound(t, 4, 3, 100)))
	require.Equal(t, 4, r.Inserted, "user 1's late seqs are kept; user 4's seq 3 is before its baseline")
	require.Equal(t, 1, r.Ignored)
}

// TestTheInboxRecordsWhichQueueHeldEachMessage: each inbox row names the broker queue its
// message came from, so a cluster's operator can tell whom a broker outage held up.
func TestTheInboxRecordsWhichQueueHeldEachMessage(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	m := inbound(t, 9, 1, 100)
	m.Queue = "broker-b/5"
	receive(t, s, false, m)
	var queue string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT queue FROM notify.notifications WHERE user_id = 9 AND seq = 1`).Scan(&queue))
	require.Equal(t, "broker-b/5", queue)
}

// TestAStaleLeaseCannotRecord: a lane whose lease passed to another lane (it stalled past
// it) cannot record anything for the user: its late outcome is fenced off, the new holder's
// counts.
func TestAStaleLeaseCannotRecord(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200))
	a, err := s.claimUsers(ctx, "a", 10, time.Millisecond, 1)
	require.NoError(t, err)
	require.Len(t, a, 1)
	require.Equal(t, int64(1), a[0].Heads[0].Seq)
	var b []claim
	wait.Until(t, 10*time.Second, "a's lease to run out and b to claim the user", func() bool {
		b, err = s.claimUsers(ctx, "b", 10, time.Minute, 1)
		require.NoError(t, err)
		return len(b) == 1
	})
	none, err := s.claimUsers(ctx, "c", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, none, "a live lease is not")

	got, err := s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Journal: true, Text: "x", Phone: "+1", Fence: a[0].At.Fence}})
	require.NoError(t, err)
	require.False(t, got[1].Held, "the stale lane's outcome is fenced off")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.sms_log`))

	got, err = s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Journal: true, Text: "x", Phone: "+1", Fence: b[0].At.Fence}})
	require.NoError(t, err)
	require.True(t, got[1].Held)
	require.Equal(t, int64(2), got[1].Heads[0].Seq)
	require.Equal(t, StatusPending, got[1].Heads[0].Status, "the next head comes with the record")
	got, err = s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Fence: b[0].At.Fence}})
	require.NoError(t, err)
	require.False(t, got[1].Held, "the same seq cannot be recorded twice")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.sms_log`))
}

// TestNewsDoesNotCutAUsersBackoffShort: a user whose SMS failed waits for its retry; its next
// SMS arriving meanwhile must not make it claimable early, or a user whose SMS always fail
// is sent again at the rate it transacts instead of backing off.
func TestNewsDoesNotCutAUsersBackoffShort(t *testing.T) {
	t.Parallel()
	pool, s := userOneClaimed(t)
	ctx := context.Background()
	r, err := s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Retry, Attempts: 1, Delay: time.Hour, Reason: "503", Fence: 1}})
	require.NoError(t, err)
	require.True(t, r[1].Held)
	receive(t, s, false, inbound(t, 1, 2, 200))
	c, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, c, "the news made the user due before its retry")
	v, err := s.View(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.Zero(t, v.Due, "the gate view counts a user waiting for its retry as due")

	// Once the retry is due, the user is claimed with its failed SMS first.
	_, err = pool.Exec(ctx, `UPDATE notify.progress SET due_at = now() WHERE user_id = 1`)
	require.NoError(t, err)
	c, err = s.claimUsers(ctx, "b", 10, time.Minute, 2)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, int64(1), c[0].Heads[0].Seq)
	require.Len(t, c[0].Heads, 2)
}

// TestRunsStopAtAGapAndAtAFailure: a claim hands a lane a user's waiting SMS up to the first
// gap; with a journaled sender the lane records them as one run, and an SMS that fails in the
// middle ends the run: those before it are sent, it waits for its retry, those after it wait
// for it.
func TestRunsStopAtAGapAndAtAFailure(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200), inbound(t, 1, 3, 300), inbound(t, 1, 5, 500))
	c, err := s.claimUsers(ctx, "a", 1, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, c, 1)
	var seqs []int64
	for _, h := range c[0].Heads {
		seqs = append(seqs, h.Seq)
	}
	require.Equal(t, []int64{1, 2, 3}, seqs, "up to the gap at 4")
	require.NoError(t, s.release(ctx, 1, c[0].At.Fence, true))

	// Seq 2 (an amount of 2.00, which the failure switch fails) inside a journaled run.
	sw := &senders.FailureSwitch{Inner: senders.NewLogSender(nil), FailAmount: 200}
	lanes, stop := startLanes(t, s, LaneConfig{Workers: 1, Sender: sw,
		Policy: RetryPolicy{Base: time.Hour, Max: time.Hour, MaxAttempts: 3, DeadLetterAfter: time.Hour}})
	lanes.Wake()
	wait.On(t, 10*time.Second, "seq 2's first attempt", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 2 AND attempts = 1`) == 1
	})
	stop()
	rows, err := pool.Query(ctx, `SELECT seq, status, attempts FROM notify.notifications WHERE user_id = 1 ORDER BY seq`)
	require.NoError(t, err)
	type row struct {
		Seq      int64
		Status   string
		Attempts int
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, []row{{1, StatusSent, 1}, {2, StatusPending, 1}, {3, StatusPending, 0}, {5, StatusPending, 0}}, got)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.sms_log`))
	require.Equal(t, 1, count(t, pool, `SELECT last_seq FROM notify.progress WHERE user_id = 1`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id = 1 AND due_at > now() + interval '40 minutes' AND lane_owner IS NULL`),
		"it waits for its retry, given back")
}

// TestAnInboxWriteNeverWaitsForALane: while a lane's record holds a user's rows (locked and
// changed, not yet committed — on a busy machine a record of many users can take a second or
// more), the consumer writes that user's next SMS. The write must not wait for the record: a
// queue waiting there consumes nothing at all.
func TestAnInboxWriteNeverWaitsForALane(t *testing.T) {
	t.Parallel()
	pool, s := userOneClaimed(t)
	ctx := context.Background()

	// What a record of seq 1 holds until it commits.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once the test committed it
	_, err = tx.Exec(ctx, `SELECT 1 FROM notify.progress WHERE user_id = 1 FOR UPDATE`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE notify.progress SET last_seq = 1, updated_at = now() WHERE user_id = 1`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', finished_at = now() WHERE user_id = 1 AND seq = 1`)
	require.NoError(t, err)

	// The deadline only turns a hang into a failure; the write does not wait at all.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	r, err := s.Arrive(wctx, s.db, []Arrival{inbound(t, 1, 2, 200), inbound(t, 2, 1, 300)}, nil)
	require.NoError(t, err, "the inbox write waited for the lane's record")
	require.Equal(t, 2, r.Inserted)
	require.NoError(t, tx.Commit(ctx))
}

// TestAnInboxWriteDuringARecordIsNeverLost: the consumer's write of a user's next SMS commits
// after a lane's record of the previous one read the inbox (the record does not see it) and
// gave the user back as idle. The user must not be stranded idle with the SMS in the inbox:
// the next claim takes it with that SMS. With workers reserved, the write does not claim the
// user either: its statement began while the lane held the user, so it sees it leased even
// once the record gave it back, and wakes it.
func TestAnInboxWriteDuringARecordIsNeverLost(t *testing.T) {
	t.Parallel()
	for name, ticket := range map[string]*Ticket{"woken": nil, "workers reserved": {n: 1, owner: "w", lease: time.Minute, run: 1}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, s := userOneClaimed(t)
			ctx := context.Background()

			// Hold the consumer's write of seq 2 back: an uncommitted row with the same key
			// makes its insert wait until that row is rolled back.
			next := inbound(t, 1, 2, 200)
			blocker, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer blocker.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
			_, err = blocker.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status) VALUES (1, 2, 'pending')`)
			require.NoError(t, err)
			type result struct {
				a   Arrived
				err error
			}
			written := make(chan result, 1)
			go func() {
				a, err := s.Arrive(ctx, s.db, []Arrival{next}, ticket)
				written <- result{a, err}
			}()
			wait.Until(t, 10*time.Second, "the inbox write to be under way", func() bool {
				return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
			})

			r, err := s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Fence: 1}})
			require.NoError(t, err)
			require.True(t, r[1].Held)
			require.True(t, r[1].Released, "the record cannot see seq 2 yet: it gives the user back as idle")
			require.NoError(t, blocker.Rollback(ctx))
			w := <-written
			require.NoError(t, w.err)
			require.Zero(t, w.a.Claimed())
			require.Equal(t, 1, w.a.Woken)

			c, err := s.claimUsers(ctx, "b", 1, time.Minute, 1)
			require.NoError(t, err)
			require.Len(t, c, 1, "the user was stranded idle with seq 2 in the inbox")
			require.Equal(t, Position{LastSeq: 1, Fence: 2, Leased: true}, c[0].At)
			require.Equal(t, int64(2), c[0].Heads[0].Seq)
			require.Equal(t, StatusPending, c[0].Heads[0].Status)
		})
	}
}

// TestAnInboxWriteClaimsTheIdleUsersItBringsTheNextSMSOf: with workers reserved, a write
// claims (a new fence, leased, due at the lease's end, no wake row) each user whose lane is
// free and idle and whose next SMS it brings, new users too, up to the workers reserved, and
// hands each over with its new SMS from its next seq on. It wakes the others: a leased user,
// one whose next SMS is still missing, one another transaction holds (without waiting for
// it), and those past the reserved workers. What it claimed records under its fence.
func TestAnInboxWriteClaimsTheIdleUsersItBringsTheNextSMSOf(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO notify.progress (user_id, last_seq, fence, lane_owner, lane_until, due_at) VALUES
		(2, 1, 4, NULL, NULL, NULL),                                                -- idle, next is 2
		(3, 0, 1, 'other', now() + interval '1 minute', now() + interval '1 minute'), -- leased
		(4, 0, 0, NULL, NULL, NULL),                                                -- idle, next (1) missing
		(5, 0, 0, NULL, NULL, NULL)                                                 -- held by another transaction`)
	require.NoError(t, err)
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // ends the test's hold
	_, err = holder.Exec(ctx, `SELECT 1 FROM notify.progress WHERE user_id = 5 FOR UPDATE`)
	require.NoError(t, err)

	// Three workers: user 2 (known), then new users in user order, 1 before 6.
	ticket := &Ticket{n: 3, owner: "lane-a", lease: time.Minute, run: 10}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	a, err := s.Arrive(wctx, s.db, []Arrival{
		inbound(t, 1, 1, 100), inbound(t, 1, 2, 100), inbound(t, 2, 2, 100), inbound(t, 3, 1, 100),
		inbound(t, 4, 2, 100), inbound(t, 5, 1, 100), inbound(t, 6, 1, 100), inbound(t, 7, 1, 100),
	}, ticket)
	require.NoError(t, err, "the write waited for user 5's holder")
	require.Equal(t, 8, a.Inserted)
	require.Equal(t, 4, a.Woken, "users 3, 4, 5 and 7 are woken")
	got := map[int64]claim{}
	for _, c := range a.claims {
		got[c.UserID] = c
	}
	require.Len(t, got, 3)
	seqs := func(c claim) (out []int64) {
		for _, h := range c.Heads {
			require.Equal(t, StatusPending, h.Status)
			require.NotEmpty(t, h.Event)
			require.NotEmpty(t, h.Text)
			out = append(out, h.Seq)
		}
		return out
	}
	require.Equal(t, Position{LastSeq: 0, Fence: 1, Leased: true}, got[1].At)
	require.Equal(t, []int64{1, 2}, seqs(got[1]))
	require.Equal(t, Position{LastSeq: 1, Fence: 5, Leased: true}, got[2].At)
	require.Equal(t, []int64{2}, seqs(got[2]))
	require.Equal(t, Position{LastSeq: 0, Fence: 1, Leased: true}, got[6].At)
	require.Equal(t, []int64{1}, seqs(got[6]))
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id IN (1, 2, 6)
		AND lane_owner = 'lane-a' AND lane_until > now() AND due_at > now()`), "claimed: leased, and due when the lease ends")
	var woken []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(DISTINCT user_id ORDER BY user_id) FROM notify.wakes`).Scan(&woken))
	require.Equal(t, []int64{3, 4, 5, 7}, woken)
	require.NoError(t, holder.Rollback(ctx))

	r, err := s.record(ctx, time.Minute, 10, []outcome{
		{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Fence: 1}, {UserID: 2, Seq: 2, Verdict: Sent, Attempts: 1, Fence: 5},
	})
	require.NoError(t, err)
	require.True(t, r[1].Held)
	require.True(t, r[2].Held)
	require.Equal(t, int64(2), r[1].Heads[0].Seq)

	// Without workers reserved, a write claims nobody.
	a, err = s.Arrive(ctx, s.db, []Arrival{inbound(t, 8, 1, 100)}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, a.Woken)
	require.Zero(t, a.Claimed())
}

// TestAUserAWriteClaimedForADeadLaneComesBack: a write claims a user for workers that never
// start (the process died after the commit). The user is due when the claim's lease ends,
// as a claim's user is, and another lane's claim then takes it, under a new fence, with the
// SMS.
func TestAUserAWriteClaimedForADeadLaneComesBack(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	a, err := s.Arrive(ctx, s.db, []Arrival{inbound(t, 1, 1, 100)}, &Ticket{n: 1, owner: "dead", lease: 300 * time.Millisecond, run: 1})
	require.NoError(t, err)
	require.Equal(t, 1, a.Claimed())
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.wakes`))
	c, err := s.claimUsers(ctx, "b", 1, time.Minute, 1)
	require.NoError(t, err)
	require.Empty(t, c, "claimed while the dead lane's lease runs")
	wait.Until(t, 10*time.Second, "the lease to end and a claim to take the user", func() bool {
		c, err = s.claimUsers(ctx, "b", 1, time.Minute, 1)
		require.NoError(t, err)
		return len(c) == 1
	})
	require.Equal(t, Position{LastSeq: 0, Fence: 2, Leased: true}, c[0].At)
	require.Equal(t, int64(1), c[0].Heads[0].Seq)
	require.Equal(t, StatusPending, c[0].Heads[0].Status)
}

// TestInboxWritesAndRecordsNeverDeadlock: consumers write batches touching many users while
// the lanes record runs of the same users; both lock progress rows in user order, so
// Postgres never finds a deadlock (each one stalls every lane for a second).
func TestInboxWritesAndRecordsNeverDeadlock(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 16, Sender: senders.NewLogSender(nil)})
	const users, perUser, consumers = 60, 40, 4
	var batches [consumers][][]Arrival
	for c := range consumers {
		rnd := rand.New(rand.NewPCG(uint64(c), 7))
		// Each consumer owns the seqs ≡ c (mod consumers) of every user, and writes them in
		// batches that mix users in random order, as queues after a reshard would.
		var mine []Arrival
		for seq := int64(1 + c); seq <= perUser; seq += consumers {
			for u := int64(1); u <= users; u++ {
				mine = append(mine, inbound(t, u, seq, 100))
			}
		}
		rnd.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
		for len(mine) > 0 {
			n := min(len(mine), 32)
			batches[c] = append(batches[c], mine[:n])
			mine = mine[n:]
		}
	}
	var failed sync.Map
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			for i, b := range batches[c] {
				// A batch the database refuses comes again, as the consumer does it. Half
				// the batches claim the idle users whose next SMS they bring, as the
				// notifier's inbox does; the others wake them.
				for attempt := 0; ; attempt++ {
					var err error
					if i%2 == 0 {
						_, err = arriveFor(ctx, s, lanes, b...)
					} else if _, err = s.Arrive(ctx, s.db, b, nil); err == nil {
						lanes.Wake()
					}
					if err == nil {
						break
					}
					failed.Store(err.Error(), true)
					if attempt > 20 {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	failed.Range(func(k, _ any) bool { t.Errorf("an inbox write failed: %v", k); return true })
	wait.On(t, 60*time.Second, "every SMS", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.sms_log`) == users*perUser
	})
	require.Zero(t, lanes.Stats().RecordFailures, "a record failed (deadlock?) and was tried again")
	require.Zero(t, lanes.Stats().Fenced)
	// Backends report their deadlocks to the statistics within seconds; if one did already:
	require.Zero(t, count(t, pool, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`), "deadlocks")
}

// BenchmarkRecord256Users records what 256 workers hand the committers when every user has a
// run of 32 SMS waiting (8,192 outcomes in one statement), on an inbox of 1,000 users. The
// statement was quadratic in the batch (it joined every user with every outcome) and took
// ~290 ms here; it takes ~140 ms. Run: go test -run '^$' -bench Record ./internal/notify/
func BenchmarkRecord256Users(b *testing.B) {
	pool, _ := testdb.New(b)
	s := NewStore(pool)
	ctx := context.Background()
	const users, run = 1000, 32
	next := int64(1)
	fill := func() {
		for range run {
			batch := make([]Arrival, 0, users)
			for u := int64(1); u <= users; u++ {
				batch = append(batch, inbound(b, u, next, 100))
			}
			receive(b, s, false, batch...)
			next++
		}
	}
	for b.Loop() {
		b.StopTimer()
		fill()
		c, err := s.claimUsers(ctx, "a", 256, time.Minute, run)
		require.NoError(b, err)
		var outs []outcome
		for _, cl := range c {
			for _, h := range cl.Heads {
				outs = append(outs, outcome{UserID: h.UserID, Seq: h.Seq, Verdict: Sent, Attempts: 1, Text: "t", Phone: "+8613800000001", Journal: true, Fence: cl.At.Fence})
			}
		}
		b.StartTimer()
		_, err = s.record(ctx, time.Minute, run, outs)
		require.NoError(b, err)
		b.StopTimer()
		_, err = pool.Exec(ctx, `UPDATE notify.progress SET lane_owner = NULL, lane_until = NULL, due_at = now()`)
		require.NoError(b, err)
		b.StartTimer()
	}
}
