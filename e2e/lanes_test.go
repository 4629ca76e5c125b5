package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sync"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/rmqtest"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// newProvider starts the SMS provider the notifier's webhook sender calls, for the test.
func newProvider(t *testing.T) *smsprovider.Provider {
	p := smsprovider.Start()
	t.Cleanup(p.Close)
	return p
}

// webhookEnv runs the notifier against p with short retries; deadLetterAfter is the window
// before which no SMS is dead-lettered, whatever its attempts.
func webhookEnv(p *smsprovider.Provider, deadLetterAfter string) map[string]string {
	return map[string]string{
		"SMS_SENDER": "webhook", "SMS_WEBHOOK_URL": p.URL(), "SMS_TIMEOUT": "1s",
		"SMS_MAX_ATTEMPTS": "3", "SMS_RETRY_BASE": "200ms", "SMS_RETRY_MAX": "1s",
		"SMS_DEAD_LETTER_AFTER":  deadLetterAfter,
		"SMS_FAIL_PHONE_PATTERN": "off", "SMS_FAIL_AMOUNT": "0",
	}
}

// requireAcceptedInOrder checks that the provider accepted each user's SMS once, in seq order,
// and that it accepted want in all.
func requireAcceptedInOrder(t *testing.T, p *smsprovider.Provider, want int) {
	t.Helper()
	total := 0
	for user, seqs := range p.Delivered() {
		for i, seq := range seqs {
			require.Equal(t, int64(i+1), seq, "user %d: the provider accepted seqs %v", user, seqs)
		}
		total += len(seqs)
	}
	require.Equal(t, want, total, "SMS the provider accepted")
}

// TestProviderOutageDelaysButNeverDeadLetters: the SMS provider answers 503 to everyone for
// ten seconds while 20 users make 2 deposits each. The retry policy alone would dead-letter
// them (3 attempts, a 2 s window); the provider breaker sees failures across many users, stops
// sending and spends no attempts while it is open, so every SMS is delivered once, in order,
// after the outage, and none is dead-lettered.
func TestProviderOutageDelaysButNeverDeadLetters(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	n := s.start("notifier", webhookEnv(p, "2s"))
	a := api{t: t, base: func() string { return w.url }}
	users := createUsers(a, 20, okPhone)

	p.SetOutage(true)
	driveRound(a, users, 2, nil, "outage")
	wait.Until(t, 60*time.Second, "every event published", func() bool {
		return s.count(`SELECT count(*) FROM wallet_events WHERE published_at IS NULL`) == 0
	})
	wait.Until(t, 60*time.Second, "the provider to be called", func() bool { return len(p.Calls(nil)) > 0 })
	time.Sleep(10 * time.Second) // the outage itself: what the test is about, not a wait for a condition
	failedDuring := len(p.Calls(nil))
	p.SetOutage(false)
	wait.Until(t, 60*time.Second, "every SMS", s.smsDone)

	r := s.audit()
	t.Logf("10 s provider outage on broker %s: events=%d dead_lettered=%d provider_calls_during_outage=%d provider_accepted_after=%d",
		s.broker.BrokerAddr, r.Events, r.DeadLettered, failedDuring, len(p.Calls(func(c smsprovider.Call) bool { return c.Status == 200 && !c.Replayed })))
	require.Zero(t, r.DeadLettered, "a provider outage must delay SMS, never dead-letter them")
	requireAcceptedInOrder(t, p, 40)
	require.Less(t, failedDuring, 40*3, "the breaker should have stopped the calls during the outage")
	gate := gateView(t, n)
	require.Equal(t, "closed", gate.Breaker.State, "breaker after the outage")
	require.Positive(t, gate.Breaker.Opened, "the breaker opened during the outage")
}

// TestFailingUserNeverHoldsOthers: one user's SMS hang at the provider until they time out,
// attempt after attempt. Users on the same broker queue and elsewhere go on getting theirs:
// all of them are delivered while the poisoned user's first SMS is still being retried, and
// the poisoned user's failures, all from one user, never open the provider breaker.
func TestFailingUserNeverHoldsOthers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	n := s.start("notifier", webhookEnv(p, "10m"))
	a := api{t: t, base: func() string { return w.url }}
	const poisonedPhone = "+8613700000001"
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if c.Phone == poisonedPhone {
			return smsprovider.Fault{Hang: 3 * time.Second}
		}
		return smsprovider.Fault{}
	})
	poisoned := a.createUser("poisoned", poisonedPhone)
	var others []int64
	neighbours := 0
	for i := 0; neighbours < 5 || len(others) < 15; i++ {
		id := a.createUser(fmt.Sprintf("other %d", i), okPhone(i))
		if queueOf(id) == queueOf(poisoned) {
			neighbours++
			others = append(others, id)
		} else if len(others)-neighbours < 10 {
			others = append(others, id)
		}
	}
	driveRound(a, []int64{poisoned}, 3, nil, "poison")
	wait.Until(t, 60*time.Second, "the poisoned user's first attempt", func() bool {
		return len(p.Calls(func(c smsprovider.Call) bool { return c.Phone == poisonedPhone })) > 0
	})
	driveRound(a, others, 3, nil, "others")
	wait.Until(t, 60*time.Second, "every other user's SMS", func() bool {
		return s.count(`SELECT count(*) FROM notify.notifications WHERE user_id <> $1 AND status = 'sent'`, poisoned) == 3*len(others)
	})
	var status string
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = 1`, poisoned).Scan(&status))
	require.Equal(t, "pending", status, "the others were delivered while the poisoned user's first SMS was still being retried")
	require.Zero(t, s.count(`SELECT count(*) FROM notify.notifications WHERE user_id = $1 AND seq > 1 AND status <> 'pending'`, poisoned),
		"the poisoned user's later SMS wait for its first")
	gate := gateView(t, n)
	require.Equal(t, "closed", gate.Breaker.State)
	require.Zero(t, gate.Breaker.Opened, "one user's failures must not open the provider breaker")
	t.Logf("poisoned user %d on queue %d with %d neighbours: %d attempts so far, others delivered meanwhile",
		poisoned, queueOf(poisoned), neighbours, len(p.Calls(func(c smsprovider.Call) bool { return c.Phone == poisonedPhone })))
}

// TestAnAcceptedSMSWhoseAnswerWasLostIsRecordedSent: the provider accepts an SMS but its
// answer is lost (a 500). The retry carries the same Idempotency-Key and meets 409, as the
// provider is still finishing the first call: in progress, never delivered, so it is asked
// again, and then gets the first answer replayed (200, Idempotent-Replayed: true): "already
// delivered", so the SMS is recorded sent — not dead-lettered, not sent twice, and never
// recorded sent on the 409 alone.
func TestAnAcceptedSMSWhoseAnswerWasLostIsRecordedSent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	p := newProvider(t)
	w := s.start("walletsvc", nil)
	s.start("notifier", webhookEnv(p, "2s"))
	a := api{t: t, base: func() string { return w.url }}
	user := a.createUser("lost answer", okPhone(1))
	var dep string
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&dep))
	var epoch int64
	require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT max(epoch) FROM wallet_epochs`).Scan(&epoch))
	lost := notify.ProviderKey(dep, user, 1, epoch)
	var mu sync.Mutex
	calls := 0
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if c.Key != lost {
			return smsprovider.Fault{}
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			return smsprovider.Fault{LoseAnswer: true}
		case 2:
			return smsprovider.Fault{Status: http.StatusConflict, Body: smsprovider.InProgressBody}
		}
		return smsprovider.Fault{}
	})
	a.depositWait(user, 1000, "d1")
	a.depositWait(user, 2000, "d2")
	wait.Until(t, 60*time.Second, "every SMS", s.smsDone)
	r := s.audit()
	require.Zero(t, r.DeadLettered)
	requireAcceptedInOrder(t, p, 2)
	type answer struct {
		Status   int
		Replayed bool
	}
	var answers []answer
	for _, c := range p.Calls(func(c smsprovider.Call) bool { return c.Seq == 1 }) {
		answers = append(answers, answer{c.Status, c.Replayed})
	}
	require.Equal(t, []answer{{500, false}, {409, false}, {200, true}}, answers,
		"the lost answer, the retry while in progress, then the first answer replayed, all under the same key")
	require.Equal(t, 2, s.count(`SELECT count(*) FROM notify.notifications WHERE user_id = $1 AND status = 'sent'`, user))
}

// TestWhereANewGroupStarts: CONSUME_FROM=last starts a new consumer group at the end of the
// topic: a user whose first message seen is seq n > 1 starts at n, recorded as a baseline that
// /v1/gate shows, and the earlier events never become SMS. With CONSUME_FROM=first a user
// whose first seqs never arrive waits on the gap; after GAP_ALERT_AFTER it is listed as an
// alert in /v1/gate and /metrics, and an operator's skip lets its later SMS go.
func TestWhereANewGroupStarts(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	p, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: []string{s.broker.Namesrv}, Credentials: s.broker.Credentials, Group: rmqtest.Unique("e2e-raw")})
	require.NoError(t, err)
	defer p.Shutdown() //nolint:errcheck // the test's own client; a failed shutdown changes nothing it checks
	send := func(user, seq int64) {
		b, err := walletevent.Encode(walletevent.Event{EventID: user*1000 + seq, UserID: user, Seq: seq, Kind: walletevent.Deposit, Amount: 100,
			Currency: "CNY", BalanceAfter: 100 * seq, SagaID: user*1000 + seq, Phone: okPhone(int(user)), Locale: "en", OccurredAt: time.Now()})
		require.NoError(t, err)
		_, err = p.SendOrderly(context.Background(), ordering.Message{Topic: s.topic, ShardingKey: strconv.FormatInt(user, 10), Body: b})
		require.NoError(t, err)
	}
	const early, gapped = int64(7001), int64(7002)
	for seq := int64(1); seq <= 3; seq++ {
		send(early, seq)
	}

	last := s.start("notifier", map[string]string{"CONSUME_FROM": "last", "CONSUMER_GROUP": rmqtest.Unique("e2e-from-last")})
	// The group's start offsets are taken when it first owns the queues: keep publishing the
	// next seq until one arrives.
	next := int64(4)
	wait.Until(t, 60*time.Second, "a message published after the group started", func() bool {
		if s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, early) > 0 {
			return true
		}
		send(early, next)
		next++
		return false
	})
	send(early, next)
	var first int64
	wait.Until(t, 30*time.Second, "every SMS from the baseline on", func() bool {
		_ = s.pool.QueryRow(context.Background(), `SELECT COALESCE(min(seq), 0) FROM notify.sms_log WHERE user_id = $1`, early).Scan(&first)
		return first > 0 && s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, early) == int(next-first+1)
	})
	require.Greater(t, first, int64(3), "events published before the group existed are not sent")
	require.Equal(t, first, int64(s.count(`SELECT baseline_seq FROM notify.progress WHERE user_id = $1`, early)))
	gate := gateView(t, last)
	require.Len(t, gate.Baselines, 1)
	require.Equal(t, early, gate.Baselines[0].UserID)
	require.Equal(t, first, gate.Baselines[0].Seq)
	// Each SMS sent is observed once, from its event's commit, in the latency the alerting
	// rules hold to their objective.
	wait.Until(t, 10*time.Second, "the commit→SMS latency of each SMS", func() bool {
		return strings.Contains(metricsText(t, last), fmt.Sprintf("walletsaga_notify_commit_to_sms_seconds_count %d\n", next-first+1))
	})
	last.stop(t)

	firstN := s.start("notifier", map[string]string{"CONSUME_FROM": "first", "GAP_ALERT_AFTER": "1s",
		"CONSUMER_GROUP": rmqtest.Unique("e2e-from-first"), "OPERATOR_TOKENS": httpx.OperatorEntry("e2e", "e2e-operator-token-0123456789")})
	send(gapped, 2)
	send(gapped, 3)
	wait.Until(t, 60*time.Second, "the gap alert", func() bool {
		g := gateView(t, firstN)
		return len(g.Gaps) == 1 && g.Gaps[0].Alert
	})
	g := gateView(t, firstN)
	require.Equal(t, gapped, g.Gaps[0].UserID)
	require.Equal(t, int64(1), g.Gaps[0].Missing)
	require.Contains(t, metricsText(t, firstN), "walletsaga_notify_gap_alerts 1")
	require.Zero(t, s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, gapped), "nothing goes out past the gap")

	req, err := http.NewRequest(http.MethodPost, firstN.url+"/v1/gate/"+strconv.FormatInt(gapped, 10)+"/skip",
		strings.NewReader(`{"seq":1,"reason":"expired from the broker before the first deploy"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer e2e-operator-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, s.count(`SELECT count(*) FROM notify.audit WHERE user_id = $1 AND actor = 'e2e'`, gapped), "the skip is audited as the token's operator")
	wait.Until(t, 30*time.Second, "the SMS after the skipped gap", func() bool {
		return s.count(`SELECT count(*) FROM notify.sms_log WHERE user_id = $1`, gapped) == 2
	})
	require.Empty(t, gateView(t, firstN).Gaps)
}

// gateViewBody is the part of GET /v1/gate the tests read.
type gateViewBody struct {
	Breaker struct {
		State  string `json:"state"`
		Opened int64  `json:"opened"`
	} `json:"breaker"`
	Gaps []struct {
		UserID  int64 `json:"user_id"`
		Missing int64 `json:"missing_seq"`
		Alert   bool  `json:"alert"`
	} `json:"gaps"`
	Baselines []struct {
		UserID int64 `json:"user_id"`
		Seq    int64 `json:"baseline_seq"`
	} `json:"baselines"`
}

func gateView(t *testing.T, n *proc) gateViewBody {
	t.Helper()
	resp, err := readNotifier(n.url + "/v1/gate")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var g gateViewBody
	require.NoError(t, json.Unmarshal(b, &g), "%s", b)
	return g
}

func metricsText(t *testing.T, n *proc) string {
	t.Helper()
	resp, err := http.Get(n.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
