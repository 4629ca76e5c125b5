package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/telemetry/otlpsink"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// drive makes users×perUser deposits, each user's in sequence, users in parallel, each with an
// idempotency key so a retried request never deposits twice. Amounts differ per deposit.
func drive(a api, users []int64, perUser int, progress *atomic.Int64) {
	driveRound(a, users, perUser, progress, "dep")
}

// driveRound is drive with a key prefix, so several rounds make distinct deposits.
func driveRound(a api, users []int64, perUser int, progress *atomic.Int64, prefix string) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, u := range users {
		wg.Add(1)
		sem <- struct{}{}
		go func(u int64) {
			defer func() { <-sem; wg.Done() }()
			for i := 1; i <= perUser; i++ {
				a.deposit(u, int64(100*i+1), fmt.Sprintf("%s-%d-%d", prefix, u, i))
				if progress != nil {
					progress.Add(1)
				}
			}
		}(u)
	}
	wg.Wait()
}

func createUsers(a api, n int, phone func(i int) string) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = a.createUser(fmt.Sprintf("user %d", i), phone(i))
	}
	return ids
}

func okPhone(i int) string { return fmt.Sprintf("+86138%08d", 10000000+i*7+1) }

func logResult(t *testing.T, s *stack, what string, r audit.Result, extra string) {
	t.Logf("%s on broker %s: events=%d sms=%d lost=%d duplicated=%d out_of_order=%d dead_lettered=%d %s",
		what, s.broker.BrokerAddr, r.Events, r.SMS, r.Lost, r.Duplicated, r.OutOfOrder, r.DeadLettered, extra)
}

// TestOrderedSMSForFiftyUsers: 50 users × 40 balance changes through the REST API, the sagas,
// the outbox relay, the broker and the notifier: every user gets 40 SMS, in seq order, once.
// Midway the walletsvc process is killed with SIGKILL and restarted (sagas resume, the relay
// resumes, clients retry with their idempotency keys).
func TestOrderedSMSForFiftyUsers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	s.start("notifier", nil)
	var base atomic.Value
	base.Store(w.url)
	a := api{t: t, base: func() string { return base.Load().(string) }}
	users := createUsers(a, 50, okPhone)

	var sent atomic.Int64
	done := make(chan struct{})
	go func() { defer close(done); drive(a, users, 40, &sent) }()
	wait.Until(t, 120*time.Second, "a quarter of the deposits", func() bool { return sent.Load() >= 500 })
	w.kill()
	w2 := s.start("walletsvc", nil)
	base.Store(w2.url)
	<-done
	start := time.Now()
	// Sagas the killed runner held resume once its lease (30s) expires.
	resumed := wait.Until(t, 120*time.Second, "every saga terminal", func() bool {
		return s.count(`SELECT count(*) FROM sagas WHERE state IN ('running','compensating')`) == 0
	})
	wait.Until(t, 180*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	logResult(t, s, "50 users × 40 deposits, walletsvc killed -9 at 500", r, fmt.Sprintf("sagas_terminal_after=%s drain_after_last_request=%s", resumed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
	require.Equal(t, 2000, r.Events)
	require.Equal(t, 2000, r.SMS)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder+r.DeadLettered)
	require.Equal(t, 2000, s.count(`SELECT count(*) FROM providersim.charges`), "each deposit charged once")
}

// TestTheNotifierRunsOnADatabaseOfItsOwn: the notifier's tables live in a database of their
// own (NOTIFY_DATABASE_URL), which it migrates with its own sequence; walletsvc's database
// holds no notifier table and the notifier's no wallet table; every SMS arrives in order once
// (the audit reads each side from its own database).
func TestTheNotifierRunsOnADatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	s := newStackApart(t)
	w := s.start("walletsvc", nil)
	s.start("notifier", nil)
	a := api{t: t, base: func() string { return w.url }}
	users := createUsers(a, 10, okPhone)
	drive(a, users, 10, nil)
	wait.Until(t, 120*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	logResult(t, s, "10 users × 10 deposits, the notifier on a database of its own", r, "")
	require.Equal(t, 100, r.Events)
	require.Equal(t, 100, r.SMS)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder+r.DeadLettered)
	var walletHasNotify, notifyHasWallet bool
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT to_regclass('notify.notifications') IS NOT NULL`).Scan(&walletHasNotify))
	require.NoError(t, s.notify.QueryRow(context.Background(), `SELECT to_regclass('public.wallet_events') IS NOT NULL`).Scan(&notifyHasWallet))
	require.False(t, notifyHasWallet, "the notifier created no wallet table in its database")
	require.False(t, walletHasNotify, "walletsvc created no notifier table in its database")
}

// TestNotifierKilledMidStream: kill -9 of the notifier while SMS flow, then a restart:
// no SMS lost or repeated, order kept. The notifier runs with a stable CONSUMER_INSTANCE, so
// the restarted one is the broker's lock owner already and takes its queues back at once
// (without it, they stay locked to the dead process for up to 60 s). While it runs, a second
// notifier under the same name refuses to start.
func TestNotifierKilledMidStream(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	named := map[string]string{"CONSUMER_INSTANCE": "notifier-a"}
	n := s.start("notifier", named)
	twin := exec.Command(filepath.Join(binDir, "notifier"), "run")
	twin.Env = append(os.Environ(), "HTTP_ADDR=127.0.0.1:0", "CONSUMER_INSTANCE=notifier-a")
	for k, v := range s.env {
		twin.Env = append(twin.Env, k+"="+v)
	}
	out, err := twin.CombinedOutput()
	require.Error(t, err, "a second live notifier with the same CONSUMER_INSTANCE started:\n%s", out)
	require.Contains(t, string(out), "consumer instance name in use")
	require.Contains(t, string(out), "notifier-a")
	a := api{t: t, base: func() string { return w.url }}
	users := createUsers(a, 20, okPhone)
	done := make(chan struct{})
	go func() { defer close(done); drive(a, users, 30, nil) }()
	wait.Until(t, 120*time.Second, "200 SMS", func() bool { return s.count(`SELECT count(*) FROM notify.sms_log`) >= 200 })
	n.kill()
	killedAt := s.count(`SELECT count(*) FROM notify.sms_log`)
	s.start("notifier", named)
	<-done
	wait.Until(t, 180*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	logResult(t, s, "notifier killed -9", r, fmt.Sprintf("sms_at_kill=%d", killedAt))
	require.Equal(t, 600, r.SMS)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder+r.DeadLettered)
}

// queueOf is the queue walletsvc's selector (QUEUE_HASH's default, Java's
// SelectMessageQueueByHash) puts user on among the stack's queues.
func queueOf(user int64) int {
	return ordering.HashJava.Slot(strconv.FormatInt(user, 10), stackQueues)
}

// TestPoisonedUserIsDeadLetteredAndOthersProceed: a user whose phone always fails gets
// exactly the configured attempts per SMS, each then dead-lettered (recorded, and in the
// DLQ), and that user's next SMS still goes out; a deposit of 4.04 fails the same way for a
// healthy user, whose next SMS follows. A user sharing the poisoned user's queue is not held
// up by it; the test reports how long its SMS took.
func TestPoisonedUserIsDeadLetteredAndOthersProceed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	s.start("notifier", nil)
	a := api{t: t, base: func() string { return w.url }}
	poisoned := a.createUser("poisoned", "+8613800000000")
	var neighbour int64
	for i := 0; neighbour == 0; i++ {
		id := a.createUser(fmt.Sprintf("candidate %d", i), okPhone(i))
		if queueOf(id) == queueOf(poisoned) {
			neighbour = id
		}
	}
	healthy := a.createUser("healthy", okPhone(99))

	// Each deposit waits for its saga, as a person would: balance changes in request order.
	a.depositWait(poisoned, 1000, "p1")
	a.depositWait(poisoned, 2000, "p2")
	a.depositWait(healthy, 10000, "h1")
	a.depositWait(healthy, 404, "h2") // its SMS fails by amount
	a.depositWait(healthy, 5000, "h3")
	enqueued := time.Now()
	a.deposit(neighbour, 700, "n1")
	heldUp := wait.Until(t, 60*time.Second, "the neighbour's SMS", func() bool {
		return s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, neighbour) == 1
	})
	wait.Until(t, 60*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	require.Equal(t, 3, r.DeadLettered)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder, "every other SMS delivered once, in order")
	for _, seq := range []int64{1, 2} {
		var st string
		var attempts int
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT status, attempts FROM notify.notifications WHERE user_id = $1 AND seq = $2`, poisoned, seq).Scan(&st, &attempts))
		require.Equal(t, "dead_lettered", st)
		require.Equal(t, 3, attempts, "exactly the configured attempts")
	}
	var texts []string
	rows, err := s.pool.Query(context.Background(), `SELECT text FROM notify.sms_log WHERE user_id = $1 ORDER BY id`, healthy)
	require.NoError(t, err)
	for rows.Next() {
		var x string
		require.NoError(t, rows.Scan(&x))
		texts = append(texts, x)
	}
	require.Equal(t, []string{"You topped up 100.00 CNY. Balance: 100.00 CNY.", "You topped up 50.00 CNY. Balance: 154.04 CNY."}, texts,
		"the 4.04 SMS is dead-lettered and the next one follows")
	// The dead letters are in the broker's DLQ too.
	dlq := s.broker.ReadDLQ(t, s.group, 60*time.Second, func(ms []rmqtest.DLQMessage) bool { return len(ms) >= 3 })
	keys := map[string]bool{}
	for _, m := range dlq {
		ev, err := walletevent.Decode(m.Body)
		require.NoError(t, err)
		keys[ev.SeqKey()] = true
	}
	require.Equal(t, map[string]bool{fmt.Sprintf("%d:1", poisoned): true, fmt.Sprintf("%d:2", poisoned): true, fmt.Sprintf("%d:2", healthy): true}, keys)
	logResult(t, s, "poisoned user", r, fmt.Sprintf("neighbour_on_queue_%d_held_for=%s (since its deposit %s)", queueOf(poisoned), heldUp.Round(time.Millisecond), time.Since(enqueued).Round(time.Millisecond)))
}

// TestDuplicatesGapsAndBadMessages publishes straight to the topic: seq 1, then 3 before 2,
// then 2, then duplicates of 2 and 3, and an undecodable message on the same key. The user
// gets SMS 1, 2, 3 once each and in order; the bad message is recorded and dead-lettered
// without blocking the key's later messages.
func TestDuplicatesGapsAndBadMessages(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	n := s.start("notifier", map[string]string{"LOG_LEVEL": "info"})
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{s.broker.Namesrv}, Credentials: s.broker.Credentials, Group: rmqtest.Unique("e2e-raw")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	const user = 9001
	send := func(_ int64, body []byte) {
		_, err := p.SendOrderly(context.Background(), ordering.Message{Topic: s.topic, ShardingKey: strconv.Itoa(user), Body: body})
		require.NoError(t, err)
	}
	ev := func(seq, amount, balance int64) []byte {
		b, err := walletevent.Encode(walletevent.Event{EventID: seq, UserID: user, Seq: seq, Kind: walletevent.Deposit, Amount: amount,
			Currency: "CNY", BalanceAfter: balance, SagaID: seq, Phone: "+8613911112222", Locale: "en", OccurredAt: time.Now()})
		require.NoError(t, err)
		return b
	}
	send(1, ev(1, 100, 100))
	send(3, ev(3, 300, 600))
	wait.Until(t, 30*time.Second, "the user to wait on the gap at seq 2", func() bool {
		return s.count(`SELECT count(*) FROM notify.progress WHERE user_id = $1 AND gap_since IS NOT NULL AND last_seq = 1`, user) == 1
	})
	require.Equal(t, 1, s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, user), "seq 3 is not sent before seq 2")
	send(2, ev(2, 200, 300))
	send(2, ev(2, 200, 300))
	send(3, ev(3, 300, 600))
	send(0, []byte(`{"v":1,"user_id":"not a number"}`))
	send(4, ev(4, 400, 1000))
	wait.Until(t, 60*time.Second, "seq 4", func() bool {
		return s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1 AND seq = 4`, user) == 1
	})
	var seqs []int64
	rows, err := s.pool.Query(context.Background(), `SELECT seq FROM notify.sms_log WHERE user_id = $1 ORDER BY id`, user)
	require.NoError(t, err)
	for rows.Next() {
		var x int64
		require.NoError(t, rows.Scan(&x))
		seqs = append(seqs, x)
	}
	require.Equal(t, []int64{1, 2, 3, 4}, seqs)
	require.Equal(t, 1, s.count(`SELECT count(*) FROM notify.bad_messages`), "the bad message is recorded")
	dlq := s.broker.ReadDLQ(t, s.group, 60*time.Second, func(ms []rmqtest.DLQMessage) bool { return len(ms) >= 1 })
	require.Len(t, dlq, 1)
	require.Contains(t, string(dlq[0].Body), "not a number")
	n.stop(t)
	require.Contains(t, n.Output(), "duplicates=2", "the two duplicates were acknowledged without sending")
}

// TestTwoNotifiersRebalance: a second notifier joins the group while SMS flow, then the first
// leaves gracefully. Queues move between them (the client does not unlock queues it gives up
// on rebalance, so the new owner waits for the broker lock to expire); SMS stay in order and
// none is sent twice. The test reports the longest pause in the SMS flow.
func TestTwoNotifiersRebalance(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	w := s.start("walletsvc", nil)
	n1 := s.start("notifier", map[string]string{"LOG_LEVEL": "info"})
	a := api{t: t, base: func() string { return w.url }}
	users := createUsers(a, 20, okPhone)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Spread the load over time so messages flow during both changes.
		for round := 0; round < 6; round++ {
			driveRound(a, users, 5, nil, fmt.Sprintf("r%d", round))
			time.Sleep(2 * time.Second)
		}
	}()
	wait.Until(t, 60*time.Second, "100 SMS", func() bool { return s.count(`SELECT count(*) FROM notify.sms_log`) >= 100 })
	joined := time.Now()
	n2 := s.start("notifier", map[string]string{"LOG_LEVEL": "info"})
	stopProgress := s.logProgress(5*time.Second, n1, n2)
	defer stopProgress()
	wait.Until(t, 120*time.Second, "300 SMS", func() bool { return s.count(`SELECT count(*) FROM notify.sms_log`) >= 300 })
	left := time.Now()
	n1.stop(t)
	<-done
	wait.Until(t, 180*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	var maxGap float64
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT COALESCE(max(gap), 0) FROM (
		SELECT extract(epoch FROM sent_at - lag(sent_at) OVER (ORDER BY sent_at)) AS gap FROM notify.sms_log) g`).Scan(&maxGap))
	n2.stop(t)
	logResult(t, s, "two notifiers, join then leave", r, fmt.Sprintf("longest_pause_in_sms=%.1fs second_joined_at=+%s first_left_at=+%s",
		maxGap, joined.Sub(joined).Round(time.Second), left.Sub(joined).Round(time.Second)))
	require.Equal(t, 600, r.SMS)
	require.Zero(t, r.Lost+r.Duplicated+r.OutOfOrder+r.DeadLettered)
}

// TestDemoTellsTheStory runs the demo program (what make demo and the compose demo runner
// play) against a fresh stack with DEMO_EXIT=1: it exits 0 only when both users' SMS logs are
// exactly as the story says.
func TestDemoTellsTheStory(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// As make demo does: both services export their traces to the demo's OTLP receiver, and
	// the demo prints a deposit's trace from it.
	sink, err := otlpsink.Start(context.Background(), "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	otlp := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.Endpoint(), "OTEL_BSP_SCHEDULE_DELAY": "100"}
	w := s.start("walletsvc", otlp)
	otlp["SMS_MAX_ATTEMPTS"] = "3"
	n := s.start("notifier", otlp)
	cmd := exec.Command(filepath.Join(binDir, "demo"))
	cmd.Env = append(os.Environ(), "WALLETSVC_URL="+w.url, "NOTIFIER_URL="+n.url, "READ_TOKEN="+e2eReadToken, "DEMO_EXIT=1",
		"DEMO_TRACES_URL="+sink.Endpoint())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "demo output:\n%s", out)
	require.Regexp(t, `The trace of A's first top-up \(trace id [0-9a-f]{32}\)`, string(out))
	require.Regexp(t, `\n  POST /v1/users/:id/deposits \[walletsvc\] .*\n    saga.start \[walletsvc\]`, string(out))
	require.Regexp(t, `\n {14}sms.send \[notifier\]`, string(out), "the SMS's send span, at the end of the chain")
	require.Contains(t, string(out), "DEAD-LETTERED  You topped up 4.04 CNY.")
	require.Contains(t, string(out), "Refund of 30.00 CNY for a cancelled purchase.")
	require.Contains(t, string(out), "You withdrew 20.00 CNY to your bank account. Balance: 455.00 CNY.")
	require.Contains(t, string(out), "OK: A got 22 SMS in order")
}
