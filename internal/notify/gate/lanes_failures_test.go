package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// heldCall is one Send a heldSender holds until the test answers it.
type heldCall struct {
	m      notify.SMS
	answer chan error
}

// heldSender hands each Send to the test and returns what the test answers: a worker that
// stalls inside a send for as long as the test likes (within the send timeout).
type heldSender struct{ calls chan heldCall }

func (h heldSender) Send(ctx context.Context, m notify.SMS) error {
	c := heldCall{m: m, answer: make(chan error, 1)}
	select {
	case h.calls <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h heldSender) next(t *testing.T) heldCall {
	t.Helper()
	select {
	case c := <-h.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a send")
		return heldCall{}
	}
}

// TestAStaleFenceCannotRecord: a worker stalls inside a send while a process restarted under
// the same owner name (CONSUMER_INSTANCE) takes its users back and claims the user under a
// new fence. The owner name and the user's progress are still what the stalled worker saw,
// but its late outcome is refused and counted as fenced; the new claim's is recorded.
func TestAStaleFenceCannotRecord(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	receive(t, s, false, inbound(t, 1, 1, 100))
	held := heldSender{calls: make(chan heldCall)}
	old, _ := startLanes(t, s, LaneConfig{Workers: 1, Sender: held, Owner: "host/notifier-0"})
	stale := held.next(t)
	require.EqualValues(t, 1, count(t, pool, `SELECT fence FROM notify.progress WHERE user_id = 1`))

	successor, _ := startLanes(t, s, LaneConfig{Workers: 1, Sender: held, Owner: "host/notifier-0"})
	fresh := held.next(t)
	require.Equal(t, stale.m.IdempotencyKey, fresh.m.IdempotencyKey, "the same SMS, under the same key")
	require.EqualValues(t, 2, count(t, pool, `SELECT fence FROM notify.progress WHERE user_id = 1`))

	stale.answer <- nil
	wait.Until(t, 10*time.Second, "the stale worker's outcome to be fenced off", func() bool { return old.Stats().Fenced == 1 })
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status <> 'pending'`), "the stale worker recorded")

	fresh.answer <- fmt.Errorf("200 replayed: %w", notify.ErrAlreadyDelivered)
	wait.On(t, 10*time.Second, "the new claim's record", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 1 AND status = 'sent'`) == 1
	})
	// A worker counts its SMS once its record's answer is back, a moment after the commit.
	wait.On(t, 10*time.Second, "the new claim's worker to count it", recordedBy(s).Next, func() bool { return successor.Stats().Sent == 1 })
	require.Zero(t, successor.Stats().Fenced)
	require.Zero(t, old.Stats().Sent)
}

// leaseWatch is a sender that notes, at the start of every send, how much of the user's
// lease the database says is left, then sends through inner; onSend runs first.
type leaseWatch struct {
	pool   *pgxpool.Pool
	inner  notify.Sender
	onSend func(notify.SMS)
	mu     sync.Mutex
	left   map[int64]time.Duration // seq → lease left when its send started
}

func (w *leaseWatch) Send(ctx context.Context, m notify.SMS) error {
	var left float64
	if err := w.pool.QueryRow(ctx, `SELECT extract(epoch FROM lane_until - now())::float8 FROM notify.progress WHERE user_id = $1`, m.UserID).Scan(&left); err != nil {
		return err
	}
	w.mu.Lock()
	w.left[m.Seq] = time.Duration(left * float64(time.Second))
	w.mu.Unlock()
	if w.onSend != nil {
		w.onSend(m)
	}
	return w.inner.Send(ctx, m)
}

// TestNoSendStartsOnALeaseAboutToExpire: a record that waits on a lock (a database blip)
// renews the lease from its start, so the lane comes out of it with less than twice the
// send timeout left. It must not call the provider then: it gives the user back, and the
// next claim sends the SMS with a whole lease.
func TestNoSendStartsOnALeaseAboutToExpire(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	const lease, sendTimeout = 3 * time.Second, time.Second
	w := &leaseWatch{pool: pool, inner: newProvider(t, pool).sender, left: map[int64]time.Duration{}}
	w.onSend = func(m notify.SMS) {
		if m.Seq != 1 {
			return
		}
		// Seq 1's record waits 1.8 s for this lock, leaving 1.2 s of a 3 s lease.
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM notify.progress WHERE user_id = $1 FOR UPDATE`, m.UserID)
		require.NoError(t, err)
		time.AfterFunc(1800*time.Millisecond, func() { _ = tx.Rollback(ctx) })
	}
	receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200))
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: w, Lease: lease, SendTimeout: sendTimeout})
	wait.On(t, 20*time.Second, "both SMS", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND status = 'sent'`) == 2
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.left, 2)
	for seq, left := range w.left {
		require.GreaterOrEqual(t, left, 2*sendTimeout-200*time.Millisecond, "seq %d's send started with %s of its lease left", seq, left)
	}
	require.EqualValues(t, 1, lanes.Stats().LeaseShort, "the user was given back once instead of sent to")
}

func TestSendable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		left, timeout time.Duration
		want          bool
	}{
		{30 * time.Second, 5 * time.Second, true},
		{10 * time.Second, 5 * time.Second, true},
		{10*time.Second - time.Millisecond, 5 * time.Second, false},
		{time.Second, 5 * time.Second, false},
		{-time.Second, 5 * time.Second, false},
	} {
		require.Equal(t, tc.want, sendable(tc.left, tc.timeout), "%s left, timeout %s", tc.left, tc.timeout)
	}
}

// brokenReply is what a provider in trouble answers one user: a 503 whose body is cut inside
// a multi-byte character and holds a NUL.
var brokenReply = func() string { s := "服务维护\x00中"; return s[:len(s)-1] }()

// TestABrokenProviderReplyNeverWedgesTheLanes: the webhook provider answers one user's every
// SMS with a broken body. The reply becomes the SMS's failure reason as clean text: its
// attempts are recorded, it is dead-lettered per the policy and the user's next SMS goes out;
// every other user's SMS are recorded meanwhile and no record statement fails. Every request
// carries the SMS's provider key, "<deployment>:<user>:<seq>".
func TestABrokenProviderReplyNeverWedgesTheLanes(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	const broken, users, perUser = 3, 12, 3
	p := smsprovider.Start()
	t.Cleanup(p.Close)
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if c.UserID == broken && c.Seq == 1 {
			return smsprovider.Fault{Status: http.StatusServiceUnavailable, Body: brokenReply}
		}
		return smsprovider.Fault{}
	})
	sender, err := senders.NewWebhookSender(p.URL(), time.Second, nil)
	require.NoError(t, err)
	var all []Arrival
	for u := int64(1); u <= users; u++ {
		for seq := int64(1); seq <= perUser; seq++ {
			all = append(all, inbound(t, u, seq, 100*seq))
		}
	}
	receive(t, s, false, all...)
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 8, Sender: sender, SendTimeout: time.Second})
	wait.On(t, 30*time.Second, "every SMS finished", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status IN ('sent', 'dead_lettered')`) == users*perUser
	})
	var status, lastErr string
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, attempts, last_error FROM notify.notifications
		WHERE user_id = $1 AND seq = 1`, broken).Scan(&status, &attempts, &lastErr))
	require.Equal(t, StatusDeadLettered, status)
	require.Equal(t, testPolicy().MaxAttempts, attempts)
	require.True(t, utf8.ValidString(lastErr))
	require.Contains(t, lastErr, "服务维护\ufffd\ufffd", "the reply, cleaned")
	require.Equal(t, users*perUser-1, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'sent'`))
	wait.On(t, 10*time.Second, "the lanes to count the dead letter", recordedBy(s).Next, func() bool { return lanes.Stats().DeadLettered == 1 })
	st := lanes.Stats()
	require.Zero(t, st.RecordFailures, "a record statement failed")
	require.Zero(t, st.RecordsRefused)
	require.EqualValues(t, 1, st.DeadLettered)

	var dep string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&dep))
	keys := map[string][2]int64{} // key → (user, seq) of the SMS that carried it
	for _, c := range p.Calls(nil) {
		keys[c.Key] = [2]int64{c.UserID, c.Seq}
	}
	require.Len(t, keys, users*perUser, "one key per SMS, the same for each attempt")
	for k, sms := range keys {
		require.Equal(t, notify.ProviderKey(dep, sms[0], sms[1], notifytest.Epoch), k)
	}
}

// claimed claims every user with SMS in the inbox, under lane "a", runs of up to run.
func claimed(t *testing.T, s *Store, run int) map[int64]claim {
	t.Helper()
	c, err := s.claimUsers(context.Background(), "a", 100, time.Minute, run)
	require.NoError(t, err)
	out := map[int64]claim{}
	for _, cl := range c {
		out[cl.UserID] = cl
	}
	return out
}

// sentRun is what a journaled lane hands the committer for a claim's heads: each sent, with
// text as the SMS text of seq bad (the others "ok").
func sentRun(c claim, bad int64, text string) []outcome {
	var outs []outcome
	for _, h := range c.Heads {
		o := outcome{UserID: h.UserID, Seq: h.Seq, Verdict: Sent, Attempts: 1, Text: "ok", Phone: "+8613800001234", Journal: true, Fence: c.At.Fence}
		if h.Seq == bad {
			o.Text = text
		}
		outs = append(outs, o)
	}
	return outs
}

// TestARefusedRowIsIsolatedFromItsBatch: one outcome of a record batch holds data Postgres
// refuses (a NUL in a text; SQLSTATE 22021). The batch is split until that outcome is alone:
// its batch-mates are recorded, the outcomes before it in its own run too, and it is recorded
// as a failed attempt whose reason, an operator sees, is the refusal; the rest of its run
// waits for it.
func TestARefusedRowIsIsolatedFromItsBatch(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	ctx := context.Background()
	for u := int64(1); u <= 5; u++ {
		receive(t, s, false, inbound(t, u, 1, 100), inbound(t, u, 2, 200), inbound(t, u, 3, 300))
	}
	l, err := NewLanes(s, LaneConfig{Owner: "a", Sender: senders.NewLogSender(nil), Logger: quiet,
		Policy: RetryPolicy{Base: time.Hour, Max: time.Hour, MaxAttempts: 3, DeadLetterAfter: time.Hour}})
	require.NoError(t, err)
	c := claimed(t, s, 3)
	var batch []commitReq
	for u := int64(1); u <= 5; u++ {
		bad := int64(0)
		switch u {
		case 2:
			bad = 1 // its run's first outcome
		case 4:
			bad = 2 // inside its run
		}
		batch = append(batch, commitReq{outs: sentRun(c[u], bad, "bad\x00text"), reply: make(chan commitRes, 1)})
	}
	l.recordBatch(ctx, batch)

	got := map[int64]commitRes{}
	for _, r := range batch {
		res := <-r.reply
		require.NoError(t, res.err)
		require.True(t, res.r.Held)
		got[r.outs[0].UserID] = res
	}
	verdicts := func(u int64) []Verdict {
		var v []Verdict
		for _, o := range got[u].outs {
			v = append(v, o.Verdict)
		}
		return v
	}
	for _, u := range []int64{1, 3, 5} {
		require.Equal(t, []Verdict{Sent, Sent, Sent}, verdicts(u), "user %d", u)
	}
	require.Equal(t, []Verdict{Retry}, verdicts(2))
	require.Equal(t, []Verdict{Sent, Retry}, verdicts(4))
	require.EqualValues(t, 2, l.Stats().RecordsRefused)

	require.Equal(t, 3*3+1, count(t, pool, `SELECT count(*) FROM notify.sms_log`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.sms_log WHERE user_id = 4 AND seq = 1`))
	for _, u := range []int64{2, 4} {
		var seq int64
		var lastErr string
		require.NoError(t, pool.QueryRow(ctx, `SELECT n.seq, n.last_error FROM notify.notifications n
			WHERE n.user_id = $1 AND n.status = 'pending' AND n.attempts = 1`, u).Scan(&seq, &lastErr))
		require.Contains(t, lastErr, "the database refused to record it as sent")
		require.Contains(t, lastErr, "SQLSTATE 22021")
		require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.progress WHERE user_id = $1 AND last_seq = $2 - 1
			AND lane_owner IS NULL AND due_at > now()`, u, seq), "user %d waits for its retry", u)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 4 AND seq = 3 AND status = 'pending' AND attempts = 0`),
		"the rest of the run waits")
}

func TestRecordRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("lanes: record: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("lanes: record: %w", &pgconn.PgError{Code: "40P01"}), true}, // deadlock
		{fmt.Errorf("lanes: record: %w", &pgconn.PgError{Code: "57P01"}), true}, // the server is shutting down
		{errors.New("unexpected EOF"), true},
		{fmt.Errorf("lanes: record: %w", context.Canceled), false},
		{fmt.Errorf("lanes: record: %w", puddle.ErrClosedPool), false},
		{fmt.Errorf("lanes: record: %w", &pgconn.PgError{Code: "22021"}), false}, // not UTF-8
		{fmt.Errorf("lanes: record: %w", &pgconn.PgError{Code: "23514"}), false}, // a check
	} {
		require.Equal(t, tc.want, recordRetryable(tc.err), "%v", tc.err)
	}
}

// TestAHangingRecordIsCutOffAndTheUserGivenBack: another transaction holds a lock the
// user's record needs, for longer than any record may take. Each record attempt is cut off
// by the per-attempt timeout; after the bounded attempts the worker gives the user back
// (long before its lease would run out), and the user is claimed again under a new fence.
// Once the lock is gone, the SMS is sent again under the same key (the provider says it has
// it) and recorded once. The lanes' pool loses every cancel request, as a loaded machine
// loses some (testdb.LosingCancels): a record attempt cut off by the client then goes on
// waiting on the server, holding the user's row, unless the server bounds it itself.
func TestAHangingRecordIsCutOffAndTheUserGivenBack(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.New(t)
	s := NewStore(testdb.LosingCancels(t, dbURL, 20))
	ctx := context.Background()
	receive(t, s, false, inbound(t, 1, 1, 100))
	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer blocker.Rollback(ctx) //nolint:errcheck // a no-op once rolled back
	_, err = blocker.Exec(ctx, `SELECT 1 FROM notify.notifications WHERE user_id = 1 AND seq = 1 FOR UPDATE`)
	require.NoError(t, err)

	p := newProvider(t, pool)
	// The user comes back by the give-back, while the record still hangs: its lease (1 min)
	// is longer than the wait, so only the give-back can free it in time. (With every cancel
	// lost, it could not before the server bounded the record: the cut-off attempt's backend
	// held the user's row for as long as the blocker held its lock.)
	lanes, _ := startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender, Lease: time.Minute, RecordTimeout: 300 * time.Millisecond, RecordAttempts: 3})
	wait.Until(t, 20*time.Second, "the user given back and claimed again", func() bool {
		return count(t, pool, `SELECT fence FROM notify.progress WHERE user_id = 1`) >= 2
	})
	st := lanes.Stats()
	require.GreaterOrEqual(t, st.RecordFailures, int64(3), "the attempts before the give-back")
	require.GreaterOrEqual(t, st.RecordsGivenUp, int64(1))
	require.Zero(t, st.Sent)

	require.NoError(t, blocker.Rollback(ctx))
	wait.On(t, 20*time.Second, "the SMS recorded", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 1 AND status = 'sent'`) == 1
	})
	require.GreaterOrEqual(t, len(p.callsOf(firstKey(t, pool, 1))), 2, "sent again after the give-back")
	p.requireInOrder(t, map[int64]int{1: 1})
}

// TestASendInProgressIsAskedAgainNeverTakenForDelivered: the provider answers 409 (a send
// under the key is still in progress) to a user's first SMS, twice, then delivers it. A 409
// is no delivery: the SMS is asked for again under the same key after a backoff, delivered
// once, recorded sent (not dead-lettered, though the policy's attempts are spent by then, as
// its window is not), and only then does the user's next SMS go.
func TestASendInProgressIsAskedAgainNeverTakenForDelivered(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	p := newProvider(t, pool)
	var mu sync.Mutex
	busy := 0
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		mu.Lock()
		defer mu.Unlock()
		if c.UserID == 1 && c.Seq == 1 && busy < 2 {
			busy++
			return smsprovider.Fault{Status: http.StatusConflict, Body: smsprovider.InProgressBody}
		}
		return smsprovider.Fault{}
	})
	policy := RetryPolicy{Base: 30 * time.Millisecond, Max: 60 * time.Millisecond, MaxAttempts: 2, DeadLetterAfter: time.Minute}
	startLanes(t, s, LaneConfig{Workers: 2, Sender: p.sender, Policy: policy})
	receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200))
	wait.On(t, 10*time.Second, "both SMS recorded", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND status = 'sent'`) == 2
	})
	var statuses []int
	for _, c := range p.callsOf(firstKey(t, pool, 1)) {
		statuses = append(statuses, c.Status)
	}
	require.Equal(t, []int{http.StatusConflict, http.StatusConflict, http.StatusOK}, statuses, "asked again under the same key until delivered")
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT attempts FROM notify.notifications WHERE user_id = 1 AND seq = 1`).Scan(&attempts))
	require.Equal(t, 3, attempts)
	p.requireInOrder(t, map[int64]int{1: 2})
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`))
}

// TestTheProvidersRetryAfterDelaysTheUsersNextAttempt: a provider answering 429 with
// Retry-After: 1 (the policy's own backoff being 20 ms) is asked again for that SMS no
// sooner than a second later, and then delivers it and the user's next; a 409 with
// Retry-After is waited for the same way. A Retry-After past the policy's longest backoff
// (1.5 s here) is cut to it: asked for an hour, the SMS is tried again after 1.5 s.
func TestTheProvidersRetryAfterDelaysTheUsersNextAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, retryAfter string
		status           int
		least, most      time.Duration
	}{
		{"429 waited", "1", http.StatusTooManyRequests, time.Second, 10 * time.Second},
		{"409 waited", "1", http.StatusConflict, time.Second, 10 * time.Second},
		{"an hour is cut to the longest backoff", "3600", http.StatusServiceUnavailable, 1500 * time.Millisecond, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := testdb.New(t)
			s := NewStore(pool)
			p := newProvider(t, pool)
			var mu sync.Mutex
			refused := false
			p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
				mu.Lock()
				defer mu.Unlock()
				if c.UserID == 1 && c.Seq == 1 && !refused {
					refused = true
					return smsprovider.Fault{Status: tc.status, RetryAfter: tc.retryAfter}
				}
				return smsprovider.Fault{}
			})
			policy := RetryPolicy{Base: 20 * time.Millisecond, Max: 1500 * time.Millisecond, MaxAttempts: 5, DeadLetterAfter: time.Minute}
			startLanes(t, s, LaneConfig{Workers: 1, Sender: p.sender, Policy: policy})
			receive(t, s, false, inbound(t, 1, 1, 100), inbound(t, 1, 2, 200))
			wait.On(t, 20*time.Second, "both SMS recorded", recordedBy(s).Next, func() bool {
				return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND status = 'sent'`) == 2
			})
			calls := p.callsOf(firstKey(t, pool, 1))
			require.Len(t, calls, 2)
			require.Equal(t, tc.status, calls[0].Status)
			require.Equal(t, http.StatusOK, calls[1].Status)
			gap := calls[1].At.Sub(calls[0].At)
			require.GreaterOrEqual(t, gap, tc.least, "asked again after %s", gap)
			require.Less(t, gap, tc.most, "asked again after %s", gap)
			p.requireInOrder(t, map[int64]int{1: 2})
		})
	}
}
