// The lanes at work: order, once-ness, failures, gaps, and what a lane sends.

package gate

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestLanesDeliverEachUserInOrderOnce: 30 users × 12 SMS reach the inbox shuffled (later seqs
// before earlier ones, duplicates, in batches) while the lanes run; each user's SMS go out
// once, in seq order, each only after its predecessor was recorded; the log sender's journal
// holds each exactly once. Either every user with news is woken for the lanes' claims, or
// the writes claim the idle users whose next SMS they bring themselves (as the notifier's
// inbox does), the others woken.
func TestLanesDeliverEachUserInOrderOnce(t *testing.T) {
	t.Parallel()
	for _, claimedByWrites := range []bool{false, true} {
		t.Run(map[bool]string{false: "woken", true: "claimed by the writes"}[claimedByWrites], func(t *testing.T) {
			t.Parallel()
			pool, _ := testdb.New(t)
			s := NewStore(pool)
			p := newProvider(t, pool)
			cfg := LaneConfig{Workers: 8, Sender: p.sender, RunMax: 5}
			if claimedByWrites {
				// The dispatcher claims only when woken: a poll's claim reserves every free
				// worker while it runs, and a write meanwhile claims nobody.
				cfg.Poll = time.Hour
			}
			lanes, _ := startLanes(t, s, cfg)
			if claimedByWrites {
				// Until the lanes run they hand out no workers, and every write wakes.
				wait.Until(t, 10*time.Second, "the lanes to hand out workers", func() bool {
					ticket := lanes.Reserve(1)
					ticket.Take(Arrived{})
					return ticket != nil
				})
			}
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
			claimed := 0
			for len(all) > 0 {
				n := min(len(all), 1+rnd.IntN(32))
				if claimedByWrites {
					a, err := arriveFor(context.Background(), s, lanes, all[:n]...)
					require.NoError(t, err)
					claimed += a.Claimed()
				} else {
					receive(t, s, false, all[:n]...)
					lanes.Wake()
				}
				all = all[n:]
			}
			wait.On(t, 30*time.Second, "every SMS", recordedBy(s).Next, func() bool {
				return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'sent'`) == users*perUser
			})
			want := map[int64]int{}
			for u := int64(1); u <= users; u++ {
				want[u] = perUser
			}
			p.requireInOrder(t, want)
			require.Equal(t, users, count(t, pool, `SELECT count(*) FROM notify.progress WHERE last_seq = $1 AND lane_owner IS NULL`, perUser))
			// A worker counts its SMS once its record's answer is back, a moment after the commit.
			wait.On(t, 10*time.Second, "the lanes to count every SMS", recordedBy(s).Next, func() bool { return lanes.Stats().Sent >= users*perUser })
			st := lanes.Stats()
			require.EqualValues(t, users*perUser, st.Sent)
			require.Zero(t, st.Fenced)
			if claimedByWrites {
				require.Positive(t, claimed, "no write claimed a user")
			}
		})
	}
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
	wait.On(t, 10*time.Second, "six SMS", recordedBy(s).Next, func() bool {
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
	wait.On(t, 10*time.Second, "the others' SMS", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id > 1 AND status = 'sent'`) == 8
	})
	wait.On(t, 10*time.Second, "the dead letter and the next SMS", recordedBy(s).Next, func() bool {
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
	wait.On(t, 10*time.Second, "the dead letter", recordedBy(s).Next, func() bool {
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
	wait.On(t, 10*time.Second, "the breaker to open and probe", br.Changed, func() bool { return br.State().Opened >= 3 })
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`))
	require.LessOrEqual(t, count(t, pool, `SELECT COALESCE(max(attempts), 0) FROM notify.notifications`), 1,
		"at most the failures before the breaker opened spent an attempt")
	p.SetOutage(false)
	wait.On(t, 10*time.Second, "every SMS", recordedBy(s).Next, func() bool {
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
	wait.On(t, 10*time.Second, "user 1's SMS", recordedBy(s).Next, func() bool {
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
	wait.On(t, 10*time.Second, "user 2's SMS after the skip", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 2 AND status = 'sent'`) == 1
	})
	p.requireInOrder(t, map[int64]int{1: 3})
	require.Less(t, lanes.Stats().Claims-claims, int64(20), "the lanes looked at the users a few times, not in a loop")
	v, err = s.View(context.Background(), 10, 0)
	require.NoError(t, err)
	require.Empty(t, v.Gaps)
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
	wait.On(t, 10*time.Second, "the next SMS", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 4 AND seq = 2 AND status = 'sent'`) == 1
	})
	var lastErr string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT last_error FROM notify.notifications WHERE user_id = 4 AND seq = 1 AND status = 'dead_lettered'`).Scan(&lastErr))
	require.Contains(t, lastErr, "no longer decodes")
	require.Empty(t, p.callsOf(firstKey(t, pool, 4)), "never sent")
}

func TestPlan(t *testing.T) {
	t.Parallel()
	good := []byte(`{"v":1,"event_id":7001,"user_id":7,"seq":1,"kind":"deposit","amount":10000,"currency":"CNY","balance_after":10000,"saga_id":1,"phone":"+8613800001234","locale":"en","occurred_at":"2026-01-02T03:04:05Z"}`)
	ev, err := walletevent.Decode(good)
	require.NoError(t, err)
	sms, err := notify.Render(ev)
	require.NoError(t, err)
	require.NotEmpty(t, sms.Text)
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
		{"a pending head stored without text: rendered now rather than lost", head{UserID: 7, Seq: 1, Status: StatusPending, Event: good},
			stepSend, sms.Text, ""},
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
				require.Equal(t, notify.SMS{UserID: 7, Seq: 1, Phone: "+8613800001234", Locale: notify.LocaleEN, Kind: "deposit", Amount: 10000, Currency: "CNY", BalanceAfter: 10000,
					Text: tc.text, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, m, "the rest from the stored event")
			}
		})
	}
}

// TestTheLanesSendTheTextRenderedOnArrival: the SMS text is rendered once, when the inbox
// receives the event; the lanes send the text stored then, not a text rendered again from the
// stored event (which, had the templates changed in between, would differ). Both a webhook
// provider and the journaled log sender get it, and the inbox row keeps it.
func TestTheLanesSendTheTextRenderedOnArrival(t *testing.T) {
	t.Parallel()
	const stored = "The text the inbox rendered on arrival. Balance: 1.00 CNY."
	ctx := context.Background()

	t.Run("webhook", func(t *testing.T) {
		t.Parallel()
		pool, _ := testdb.New(t)
		s := NewStore(pool)
		p := newProvider(t, pool)
		a := inbound(t, 8, 1, 100)
		require.NotEqual(t, stored, a.Text)
		a.Text = stored
		receive(t, s, false, a)
		startLanes(t, s, LaneConfig{Workers: 1, Sender: p.sender})
		wait.On(t, 10*time.Second, "the SMS recorded sent", recordedBy(s).Next, func() bool {
			return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 8 AND seq = 1 AND status = 'sent'`) == 1
		})
		calls := p.callsOf(firstKey(t, pool, 8))
		require.Len(t, calls, 1)
		require.Equal(t, stored, calls[0].Text)
		// Its template and parameters come from the stored event, beside the stored text.
		require.Equal(t, "deposit", calls[0].Template)
		require.Equal(t, "en", calls[0].Locale)
		require.Equal(t, map[string]string{"amount": "1.00", "currency": "CNY", "balance_after": "101.00"}, calls[0].Params)
		var text string
		require.NoError(t, pool.QueryRow(ctx, `SELECT text FROM notify.notifications WHERE user_id = 8 AND seq = 1`).Scan(&text))
		require.Equal(t, stored, text)
	})
	t.Run("journaled", func(t *testing.T) {
		t.Parallel()
		pool, _ := testdb.New(t)
		s := NewStore(pool)
		a := inbound(t, 9, 1, 100)
		a.Text = stored
		receive(t, s, false, a)
		startLanes(t, s, LaneConfig{Workers: 1, Sender: senders.NewLogSender(nil)})
		wait.On(t, 10*time.Second, "the SMS logged", recordedBy(s).Next, func() bool { return count(t, pool, `SELECT count(*) FROM notify.sms_log`) == 1 })
		var text string
		require.NoError(t, pool.QueryRow(ctx, `SELECT text FROM notify.sms_log WHERE user_id = 9 AND seq = 1 AND NOT late`).Scan(&text))
		require.Equal(t, stored, text)
	})
}
