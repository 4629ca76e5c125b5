package gate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"net/http"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// inbound is (user, seq) as the inbox hands it to the gate.
func inbound(t testing.TB, user, seq, amount int64) Arrival {
	t.Helper()
	ev := notifytest.Event(user, seq, walletevent.Deposit, amount)
	b, err := walletevent.Encode(ev)
	require.NoError(t, err)
	m, err := notify.Render(ev)
	require.NoError(t, err)
	return Arrival{MsgID: fmt.Sprintf("m-%d-%d", user, seq), Event: b, UserID: user, Seq: seq, Kind: string(ev.Kind), Text: m.Text}
}

func receive(t testing.TB, s *Store, fromLast bool, ms ...Arrival) Arrived {
	t.Helper()
	r, err := s.Arrive(context.Background(), s.db, ms, fromLast)
	require.NoError(t, err)
	return r
}

// provider is the tests' SMS provider (internal/testutil/smsprovider) behind a webhook
// sender, checking the gate rule at each call: (user, seq) goes out only once (user, seq-1)
// is recorded finished.
type provider struct {
	*smsprovider.Provider
	sender     *senders.WebhookSender
	mu         sync.Mutex
	violations []string
}

func newProvider(t *testing.T, pool *pgxpool.Pool) *provider {
	t.Helper()
	p := &provider{Provider: smsprovider.Start()}
	t.Cleanup(p.Close)
	var err error
	p.sender, err = senders.NewWebhookSender(p.URL(), 0, nil)
	require.NoError(t, err)
	p.OnCall(func(c smsprovider.Call) {
		if c.Seq == 1 {
			return
		}
		var st string
		err := pool.QueryRow(context.Background(), `SELECT COALESCE((SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2), '')`,
			c.UserID, c.Seq-1).Scan(&st)
		if err != nil || (st != StatusSent && st != StatusDeadLettered && st != StatusSkipped) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.violations = append(p.violations, fmt.Sprintf("%s sent while %d was %q (%v)", c.Key, c.Seq-1, st, err))
		}
	})
	return p
}

// failWhen makes the provider answer 503 to the SMS fail picks (nil: none).
func (p *provider) failWhen(fail func(smsprovider.Call) bool) {
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if fail != nil && fail(c) {
			return smsprovider.Fault{Status: http.StatusServiceUnavailable}
		}
		return smsprovider.Fault{}
	})
}

// firstKey is the provider key of the user's seq 1 in the database behind pool.
func firstKey(t *testing.T, pool *pgxpool.Pool, user int64) string {
	t.Helper()
	var dep string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&dep))
	return notify.ProviderKey(dep, user, 1)
}

// callsOf returns the provider's calls for key, in order.
func (p *provider) callsOf(key string) []smsprovider.Call {
	return p.Calls(func(c smsprovider.Call) bool { return c.Key == key })
}

// requireInOrder checks that each user's delivered seqs are 1..n in order, and the gate rule.
func (p *provider) requireInOrder(t *testing.T, want map[int64]int) {
	t.Helper()
	p.mu.Lock()
	require.Empty(t, p.violations)
	p.mu.Unlock()
	got := p.Delivered()
	for user, n := range want {
		seqs := got[user]
		require.Len(t, seqs, n, "user %d delivered %v", user, seqs)
		for i, s := range seqs {
			require.Equal(t, int64(i+1), s, "user %d delivered %v", user, seqs)
		}
	}
}

func testPolicy() RetryPolicy {
	return RetryPolicy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 3, DeadLetterAfter: 0}
}

// startLanes runs lanes until the test ends (or stop is called).
func startLanes(t *testing.T, s *Store, cfg LaneConfig) (*Lanes, func()) {
	t.Helper()
	if cfg.Owner == "" {
		cfg.Owner = "test-" + fmt.Sprint(rand.Int64())
	}
	if cfg.Policy == (RetryPolicy{}) {
		cfg.Policy = testPolicy()
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	cfg.Logger = quiet
	l, err := NewLanes(s, cfg)
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	stop := func() { require.NoError(t, l.Stop(context.Background())) }
	t.Cleanup(stop)
	return l, stop
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// TestLanesDeliverEachUserInOrderOnce: 30 users × 12 SMS reach the inbox shuffled (later seqs
// before earlier ones, duplicates, in batches) while the lanes run; each user's SMS go out
// once, in seq order, each only after its predecessor was recorded; the log sender's journal
// holds each exactly once.
func TestLanesDeliverEachUserInOrderOnce(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 8, Sender: p.sender, RunMax: 5})
	const users, perUser = 30, 12
	var all []Arrival
	for u := int64(1); u <= users; u++ {
		for seq := int64(1); seq <= perUser; seq++ {
			all = append(all, inbound(t, u, seq, 100*seq))
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	rnd.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	all = append(all, all[:40]...) // redeliveries
	for len(all) > 0 {
		n := min(len(all), 1+rnd.IntN(32))
		receive(t, s, false, all[:n]...)
		lanes.Wake()
		all = all[n:]
	}
	wait.Until(t, 30*time.Second, "every SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'sent'`) == users*perUser
	})
	want := map[int64]int{}
	for u := int64(1); u <= users; u++ {
		want[u] = perUser
	}
	p.requireInOrder(t, want)
	require.Equal(t, users, count(t, pool, `SELECT count(*) FROM notify.progress WHERE last_seq = $1 AND lane_owner IS NULL`, perUser))
	// A worker counts its SMS once its record's answer is back, a moment after the commit.
	wait.Until(t, 10*time.Second, "the lanes to count every SMS", func() bool { return lanes.Stats().Sent >= users*perUser })
	st := lanes.Stats()
	require.EqualValues(t, users*perUser, st.Sent)
	require.Zero(t, st.Fenced)
}

// TestJournaledSenderWritesTheLogInTheRecord: with the log sender, the SMS log row is written
// in the transaction that records the SMS sent: exactly one row per (user, seq), in order.
func TestJournaledSenderWritesTheLogInTheRecord(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 4, Sender: senders.NewLogSender(nil)})
	for seq := int64(3); seq >= 1; seq-- {
		receive(t, s, false, inbound(t, 5, seq, 100), inbound(t, 6, seq, 100))
		lanes.Wake()
	}
	wait.Until(t, 10*time.Second, "six SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.sms_log`) == 6
	})
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.sms_log a JOIN notify.sms_log b
		ON a.user_id = b.user_id AND a.seq < b.seq AND a.id > b.id`), "in seq order")
	require.Equal(t, 6, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'sent'`))
}

// TestAFailingSMSHoldsOnlyItsUser: one user's first SMS keeps failing; the other users get
// theirs meanwhile. Once its attempts are spent it is dead-lettered (recorded with a
// dead-letter intent for the DLQ topic) and the user's next SMS goes out.
func TestAFailingSMSHoldsOnlyItsUser(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	p.failWhen(func(c smsprovider.Call) bool { return c.UserID == 1 && c.Seq == 1 })
	policy := RetryPolicy{Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, MaxAttempts: 3, DeadLetterAfter: 0}
	var dead sync.WaitGroup
	dead.Add(1)
	var once sync.Once
	startLanes(t, s, LaneConfig{Workers: 4, Sender: p.sender, Policy: policy, DeadLettered: func() { once.Do(dead.Done) }})
	for u := int64(1); u <= 5; u++ {
		receive(t, s, false, inbound(t, u, 1, 100), inbound(t, u, 2, 200))
	}
	wait.Until(t, 10*time.Second, "the others' SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id > 1 AND status = 'sent'`) == 8
	})
	wait.Until(t, 10*time.Second, "the dead letter and the next SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 2 AND status = 'sent'`) == 1
	})
	dead.Wait()
	var status, lastErr string
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, attempts, last_error FROM notify.notifications WHERE user_id = 1 AND seq = 1`).Scan(&status, &attempts, &lastErr))
	require.Equal(t, StatusDeadLettered, status)
	require.Equal(t, 3, attempts)
	require.Contains(t, lastErr, "gave up after 3 attempts")
	require.Len(t, p.callsOf(firstKey(t, pool, 1)), 3)
	intents, err := s.DeadLetterIntents(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, intents, 1)
	require.Equal(t, [2]int64{1, 1}, [2]int64{intents[0].UserID, intents[0].Seq})
	ev, err := walletevent.Decode(intents[0].Event)
	require.NoError(t, err, "the DLQ gets the event")
	require.Equal(t, int64(1), ev.UserID)
	p.requireInOrder(t, map[int64]int{2: 2, 3: 2, 4: 2, 5: 2})
}

// TestRetriesAreSpacedAcrossReplicas: two notifiers' lanes share the users; a failing SMS is
// tried by one lane at a time, each attempt at least the policy's backoff after the last,
// whichever replica makes it.
func TestRetriesAreSpacedAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	p.failWhen(func(smsprovider.Call) bool { return true })
	policy := RetryPolicy{Base: 40 * time.Millisecond, Max: 160 * time.Millisecond, MaxAttempts: 6, DeadLetterAfter: 0}
	startLanes(t, s, LaneConfig{Workers: 4, Sender: p.sender, Policy: policy, Owner: "replica-a"})
	startLanes(t, s, LaneConfig{Workers: 4, Sender: p.sender, Policy: policy, Owner: "replica-b"})
	receive(t, s, false, inbound(t, 9, 1, 100))
	wait.Until(t, 10*time.Second, "the dead letter", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`) == 1
	})
	calls := p.callsOf(firstKey(t, pool, 9))
	require.Len(t, calls, 6)
	for n := 1; n < len(calls); n++ {
		gap := calls[n].At.Sub(calls[n-1].At)
		require.GreaterOrEqual(t, gap, policy.Backoff(n, shortest), "attempt %d came %s after attempt %d", n+1, gap, n)
	}
}

// TestProviderOutagePostponesWithoutSpendingAttempts: the provider fails for everyone; the
// breaker opens after failures of distinct users and holds the SMS back without spending
// their attempts, so none is dead-lettered although the policy alone would have; once the
// provider is back a probe closes the breaker and everything goes out in order.
func TestProviderOutagePostponesWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	p.SetOutage(true)
	br := senders.NewBreaker(senders.BreakerConfig{Failures: 3, Open: 30 * time.Millisecond, OpenMax: 60 * time.Millisecond})
	policy := RetryPolicy{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, MaxAttempts: 2, DeadLetterAfter: 0}
	// Every user is in the inbox before the lanes start: with lanes already running, a slow
	// receive let user 1's retry come due before users 2 and 3 had failed once, and a user
	// failing twice in a row is that user's failure (not the provider's), spending its
	// attempts as the policy says.
	for u := int64(1); u <= 10; u++ {
		receive(t, s, false, inbound(t, u, 1, 100), inbound(t, u, 2, 200))
	}
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender, Policy: policy, Breaker: br})
	wait.Until(t, 10*time.Second, "the breaker to open and probe", func() bool { return br.State().Opened >= 3 })
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`))
	require.LessOrEqual(t, count(t, pool, `SELECT COALESCE(max(attempts), 0) FROM notify.notifications`), 1,
		"at most the failures before the breaker opened spent an attempt")
	p.SetOutage(false)
	wait.Until(t, 10*time.Second, "every SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'sent'`) == 20
	})
	require.Equal(t, "closed", br.State().State)
	want := map[int64]int{}
	for u := int64(1); u <= 10; u++ {
		want[u] = 2
	}
	p.requireInOrder(t, want)
	require.Positive(t, lanes.Stats().Postponed)
}

// TestAGapWaitsUntilThePredecessorArrivesOrIsSkipped: SMS behind a missing seq wait in the
// inbox (the user is marked with a gap, the lanes do not spin on it) and go out in order when
// it arrives; a seq that never arrives is skipped by an operator, and the rest follow.
func TestAGapWaitsUntilThePredecessorArrivesOrIsSkipped(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender})
	receive(t, s, false, inbound(t, 1, 3, 300), inbound(t, 1, 2, 200), inbound(t, 2, 2, 200))
	lanes.Wake()
	wait.Until(t, 10*time.Second, "both gaps", func() bool {
		v, err := s.View(context.Background(), 10, time.Hour)
		require.NoError(t, err)
		return len(v.Gaps) == 2
	})
	v, err := s.View(context.Background(), 10, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v.Gaps[0].MissingSeq)
	require.EqualValues(t, 2, v.GapAlerts, "older than a zero threshold: alerts")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.progress WHERE due_at IS NOT NULL`), "a gap is not due: nothing spins")
	claims := lanes.Stats().Claims

	receive(t, s, false, inbound(t, 1, 1, 100))
	lanes.Wake()
	wait.Until(t, 10*time.Second, "user 1's SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND status = 'sent'`) == 3
	})

	skip := func(seq int64, reason string) (last int64, err error) {
		err = pg.WithTx(context.Background(), pool, func(tx pgx.Tx) error {
			last, err = s.Skip(context.Background(), tx, 2, seq, reason)
			return err
		})
		return last, err
	}
	_, err = skip(2, "no")
	require.ErrorIs(t, err, ErrNotHeld, "only the missing seq itself can be skipped")
	last, err := skip(1, "expired from the broker")
	require.NoError(t, err)
	require.Equal(t, int64(1), last)
	lanes.Wake()
	wait.Until(t, 10*time.Second, "user 2's SMS after the skip", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 2 AND status = 'sent'`) == 1
	})
	p.requireInOrder(t, map[int64]int{1: 3})
	require.Less(t, lanes.Stats().Claims-claims, int64(20), "the lanes looked at the users a few times, not in a loop")
	v, err = s.View(context.Background(), 10, 0)
	require.NoError(t, err)
	require.Empty(t, v.Gaps)
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

// TestAnEventThatNoLongerDecodesIsDeadLetteredNotStuck: a stored event the running code can
// no longer read (say, after an event-version bump) is dead-lettered with the reason; the
// user's next SMS goes out.
func TestAnEventThatNoLongerDecodesIsDeadLetteredNotStuck(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	receive(t, s, false, inbound(t, 4, 1, 100), inbound(t, 4, 2, 200))
	_, err := pool.Exec(context.Background(), `UPDATE notify.notifications SET event = jsonb_set(event, '{v}', '99') WHERE user_id = 4 AND seq = 1`)
	require.NoError(t, err)
	startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender})
	wait.Until(t, 10*time.Second, "the next SMS", func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 4 AND seq = 2 AND status = 'sent'`) == 1
	})
	var lastErr string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT last_error FROM notify.notifications WHERE user_id = 4 AND seq = 1 AND status = 'dead_lettered'`).Scan(&lastErr))
	require.Contains(t, lastErr, "no longer decodes")
	require.Empty(t, p.callsOf(firstKey(t, pool, 4)), "never sent")
}

// TestArriveIsIdempotentAndStartsFromABaseline: the inbox keeps one row per (user, seq);
// redeliveries and seqs a user finished already are ignored; with fromLast a user first seen
// at seq n > 1 starts at n, recorded as a baseline, and earlier seqs arriving later are not
// sent.
func TestArriveIsIdempotentAndStartsFromABaseline(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	r := receive(t, s, true, inbound(t, 1, 5, 100), inbound(t, 1, 6, 100), inbound(t, 1, 5, 100), inbound(t, 2, 1, 100))
	require.Equal(t, Arrived{Inserted: 3, Ignored: 1, Baselines: 1}, r)
	r = receive(t, s, true, inbound(t, 1, 3, 100), inbound(t, 1, 7, 100))
	require.Equal(t, Arrived{Inserted: 1, Ignored: 1}, r, "seq 3 is before user 1's baseline")
	v, err := s.View(context.Background(), 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, v.Baselines, 1)
	require.Equal(t, int64(1), v.Baselines[0].UserID)
	require.Equal(t, int64(5), v.Baselines[0].Seq)
	require.EqualValues(t, 4, v.Pending)
	require.EqualValues(t, 2, v.Due)
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

// userOneClaimed returns a store whose user 1 has its seq 1 in the inbox, claimed by lane "a"
// under fence 1.
func userOneClaimed(t *testing.T) (*pgxpool.Pool, *Store) {
	t.Helper()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	receive(t, s, false, inbound(t, 1, 1, 100))
	c, err := s.claimUsers(context.Background(), "a", 1, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, int64(1), c[0].At.Fence)
	return pool, s
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

// TestTheGateViewCountsAsDueOnlyWhatAClaimWouldTake: /v1/gate's due_users and
// walletsaga_notify_due_users count the users a claim would take now; a user leased by a
// lane is not one of them, though its wake rows stay while it is leased.
func TestTheGateViewCountsAsDueOnlyWhatAClaimWouldTake(t *testing.T) {
	t.Parallel()
	_, s := userOneClaimed(t)
	ctx := context.Background()
	receive(t, s, false, inbound(t, 2, 1, 100))
	v, err := s.View(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, v.Due, "user 2 is due; user 1 is leased")
	c, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "a claim takes what the view counts")
	v, err = s.View(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.Zero(t, v.Due, "both users are leased")
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
	r, err := s.Arrive(wctx, s.db, []Arrival{inbound(t, 1, 2, 200), inbound(t, 2, 1, 300)}, false)
	require.NoError(t, err, "the inbox write waited for the lane's record")
	require.Equal(t, 2, r.Inserted)
	require.NoError(t, tx.Commit(ctx))
}

// TestAnInboxWriteDuringARecordIsNeverLost: the consumer's write of a user's next SMS commits
// after a lane's record of the previous one read the inbox (the record does not see it) and
// gave the user back as idle. The user must not be stranded idle with the SMS in the inbox:
// the next claim takes it with that SMS.
func TestAnInboxWriteDuringARecordIsNeverLost(t *testing.T) {
	t.Parallel()
	pool, s := userOneClaimed(t)
	ctx := context.Background()

	// Hold the consumer's write of seq 2 back: an uncommitted row with the same key makes
	// its insert wait until that row is rolled back.
	next := inbound(t, 1, 2, 200)
	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
	_, err = blocker.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status) VALUES (1, 2, 'pending')`)
	require.NoError(t, err)
	written := make(chan error, 1)
	go func() {
		_, err := s.Arrive(ctx, s.db, []Arrival{next}, false)
		written <- err
	}()
	wait.Until(t, 10*time.Second, "the inbox write to be under way", func() bool {
		return count(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	})

	r, err := s.record(ctx, time.Minute, 1, []outcome{{UserID: 1, Seq: 1, Verdict: Sent, Attempts: 1, Fence: 1}})
	require.NoError(t, err)
	require.True(t, r[1].Held)
	require.True(t, r[1].Released, "the record cannot see seq 2 yet: it gives the user back as idle")
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-written)

	c, err := s.claimUsers(ctx, "b", 1, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "the user was stranded idle with seq 2 in the inbox")
	require.Equal(t, int64(1), c[0].UserID)
	require.Equal(t, int64(2), c[0].Heads[0].Seq)
	require.Equal(t, StatusPending, c[0].Heads[0].Status)
}

func TestPlan(t *testing.T) {
	t.Parallel()
	good := []byte(`{"v":1,"event_id":7001,"user_id":7,"seq":1,"kind":"deposit","amount":10000,"currency":"CNY","balance_after":10000,"saga_id":1,"phone":"+8613800001234","locale":"en","occurred_at":"2026-01-02T03:04:05Z"}`)
	for _, tc := range []struct {
		name   string
		h      head
		step   step
		text   string
		reason string
	}{
		{"no head: give the user back", head{UserID: 7, Seq: 1}, stepRelease, "", ""},
		{"a head finished already: move past it", head{UserID: 7, Seq: 1, Status: StatusDeadLettered}, stepAdvance, "", ""},
		{"a skipped head: move past it", head{UserID: 7, Seq: 1, Status: StatusSkipped}, stepAdvance, "", ""},
		{"a pending head: send the text stored on arrival", head{UserID: 7, Seq: 1, Status: StatusPending, Event: good, Text: "stored"}, stepSend, "stored", ""},
		{"a pending head without text: dead-letter, never render it again", head{UserID: 7, Seq: 1, Status: StatusPending, Event: good},
			stepDeadLetter, "", "the inbox row holds no SMS text"},
		{"an event that no longer decodes: dead-letter, never stall", head{UserID: 7, Seq: 1, Status: StatusPending, Event: []byte(`{"v":2}`), Text: "stored"},
			stepDeadLetter, "", "the stored event no longer decodes"},
		{"an event for another (user, seq)", head{UserID: 7, Seq: 2, Status: StatusPending, Event: good, Text: "stored"},
			stepDeadLetter, "", "the stored event is for 7:1, not 7:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, m, reason := plan(tc.h)
			require.Equal(t, tc.step, s)
			require.Equal(t, tc.text, m.Text)
			require.Contains(t, reason, tc.reason)
			if s == stepSend {
				require.Equal(t, notify.SMS{UserID: 7, Seq: 1, Phone: "+8613800001234", Locale: notify.LocaleEN, Kind: "deposit", Amount: 10000,
					Text: tc.text, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, m, "the rest from the stored event")
			}
		})
	}
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
	wait.Until(t, 10*time.Second, "seq 2's first attempt", func() bool {
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
			for _, b := range batches[c] {
				// A batch the database refuses comes again, as the consumer does it.
				for attempt := 0; ; attempt++ {
					_, err := s.Arrive(ctx, s.db, b, false)
					if err == nil {
						break
					}
					failed.Store(err.Error(), true)
					if attempt > 20 {
						return
					}
				}
				lanes.Wake()
			}
		})
	}
	wg.Wait()
	failed.Range(func(k, _ any) bool { t.Errorf("an inbox write failed: %v", k); return true })
	wait.Until(t, 60*time.Second, "every SMS", func() bool {
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
