package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

var testPlan = PlanOptions{Duration: 4 * time.Minute, KillsEach: 3, FromQueues: 8, ToQueues: 16, GatewayOutage: time.Minute}

// requireApart checks what every plan promises about overlaps: no two faults that clash
// overlap; no process is killed while a broker is frozen (nor just before) or Postgres fails
// over, no notifier while one is frozen; the notifiers are not scaled down around either
// freeze; the freezes
// outlast what they must (a broker 30 s, a notifier twice its lease) and the held lock the
// statement timeout; all of them end before the load does.
func requireApart(t *testing.T, seed int64, plan []Fault, o PlanOptions) {
	t.Helper()
	var down, up time.Duration
	for _, f := range plan {
		switch f.Kind {
		case ScaleDown:
			down = f.At
		case ScaleUp:
			up = f.At
		case FreezeBroker:
			require.Equal(t, 30*time.Second, f.Down)
		case FreezeNotifier:
			require.Greater(t, f.Down, laneLease, "seed %d: a notifier frozen past its lease", seed)
			require.True(t, strings.HasPrefix(f.Slot, "notifier-"), "seed %d: %s", seed, f)
		case PGLock:
			require.Greater(t, f.Down, pgStatementTimeout, "seed %d: a lock held past the statement timeout", seed)
		}
		switch f.Kind {
		case FreezeBroker, PGLock, ProviderGarble:
			require.Less(t, f.At+f.Down, o.Duration-10*time.Second, "seed %d: %s ends before the load", seed, f)
		case FreezeNotifier:
			require.Less(t, f.At+slowAtMost+f.Down, o.Duration-5*time.Second, "seed %d: %s ends before the load", seed, f)
		}
	}
	for i, a := range plan {
		for _, b := range plan[i+1:] {
			require.False(t, clash(a, b), "seed %d: %s overlaps %s", seed, a, b)
		}
		switch a.Kind {
		case Failover:
			for _, k := range plan {
				require.False(t, k.Kind == Kill && footprint(k).overlaps(footprint(a)), "seed %d: %s during %s", seed, k, a)
			}
		case FreezeBroker, FreezeNotifier:
			fp := footprint(a)
			require.False(t, fp.overlaps(span{down - 5*time.Second, up + 5*time.Second}), "seed %d: %s while the notifiers are scaled down", seed, a)
			for _, k := range plan {
				if k.Kind == Kill && (a.Kind == FreezeBroker || strings.HasPrefix(k.Slot, "notifier")) {
					require.False(t, k.At >= fp.At && k.At < fp.End, "seed %d: %s during %s", seed, k, a)
				}
			}
		}
	}
}

// The schedule is a function of the seed, and every plan holds every fault the run promises.
func TestPlanIsReproducibleAndComplete(t *testing.T) {
	require.Equal(t, Plan(42, testPlan), Plan(42, testPlan), "same seed, same plan")
	without := testPlan
	without.GatewayOutage = 0
	unnumbered := func(plan []Fault) []Fault {
		plan = slices.DeleteFunc(plan, func(f Fault) bool { return f.Kind == GatewayOutage })
		for i := range plan {
			plan[i].Planned = 0
		}
		return plan
	}
	require.Equal(t, unnumbered(Plan(42, without)), unnumbered(Plan(42, testPlan)), "the outage leaves the other faults where they were")
	require.NotEqual(t, Plan(42, testPlan), Plan(43, testPlan), "another seed, another plan")
	for seed := int64(1); seed <= 200; seed++ {
		plan := Plan(seed, testPlan)
		kinds := map[FaultKind]int{}
		kills := map[string]int{}
		var down, up, broker, pg, reshard, provDown, provHang time.Duration
		for i, f := range plan {
			kinds[f.Kind]++
			require.Equal(t, i+1, f.Planned)
			require.True(t, f.At > 0 && f.At < testPlan.Duration, "seed %d: %s outside the load", seed, f)
			if i > 0 {
				require.LessOrEqual(t, plan[i-1].At, f.At, "seed %d: plan not in time order", seed)
			}
			switch f.Kind {
			case Kill:
				kills[f.Slot]++
				require.True(t, f.Down > 0 && f.Down <= 3*time.Second, "seed %d: %s", seed, f)
			case ScaleDown:
				down = f.At
			case ScaleUp:
				up = f.At
			case RestartBroker:
				broker = f.At
			case RestartPG:
				pg = f.At
			case Failover:
				require.Less(t, f.At+failoverFor, testPlan.Duration, "seed %d: the failover is over before the load ends", seed)
			case Reshard:
				reshard = f.At
				require.Equal(t, 16, f.Queues)
			case ProviderDown:
				provDown = f.At
				require.Equal(t, 30*time.Second, f.Down)
				require.Less(t, f.At+f.Down, testPlan.Duration-30*time.Second, "seed %d: the provider is back well before the load ends", seed)
			case ProviderHang:
				provHang = f.At
				require.Equal(t, 15*time.Second, f.Down)
			case GatewayOutage:
				require.Equal(t, time.Minute, f.Down)
				require.Contains(t, []string{"fail", "timeout"}, f.Mode)
				require.LessOrEqual(t, f.At+f.Down, testPlan.Duration-30*time.Second, "seed %d: the outage ends well before the load", seed)
			}
		}
		require.Equal(t, map[FaultKind]int{Kill: 12, RestartBroker: 1, RestartPG: 1, Failover: 1, Reshard: 1, ScaleDown: 1, ScaleUp: 1,
			ProviderDown: 1, ProviderHang: 1, GatewayOutage: 1, FreezeBroker: 1, FreezeNotifier: 1, ProviderGarble: 1, PGLock: 1}, kinds, "seed %d", seed)
		requireApart(t, seed, plan, testPlan)
		require.Equal(t, map[string]int{wallet1: 3, wallet2: 3, notifier1: 3, notifier2: 3}, kills, "seed %d", seed)
		require.Less(t, down, up, "seed %d: scale down before up", seed)
		for _, f := range plan {
			if f.Kind == Kill && f.Slot == notifier2 {
				require.False(t, f.At > down-5*time.Second && f.At < up+5*time.Second, "seed %d: notifier-2 killed while scaled away: %s", seed, f)
			}
		}
		gap := 24 * time.Second
		starts := []time.Duration{broker, pg, reshard, provDown, provHang}
		for i := range starts {
			for j := i + 1; j < len(starts); j++ {
				require.GreaterOrEqual(t, (starts[i] - starts[j]).Abs(), gap, "seed %d: faults %d and %d", seed, i, j)
			}
		}
	}
}

// The verdict line states the run's seed and the counts that must be zero.
func TestVerdictLine(t *testing.T) {
	r := audit.Result{Users: 3, Events: 9, SMS: 7, DeadLettered: 2, Lost: 2, Duplicated: 1, OutOfOrder: 1, SagasStuck: 2, LedgerMismatch: 1, Unpublished: 1}
	require.Equal(t, "chaos: seed=7 users=3 events=9 sms=7 lost=2 duplicated=1 out_of_order=1 sagas_stuck=2 ledger_mismatch=1", verdict(r, 7))
}

// A fault's impact is read from the SMS log: the longest silence after it, and the slowest
// event committed during it.
func TestMeasureImpactReadsTheSMSLog(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	end := start.Add(2 * time.Second)
	_, err := pool.Exec(ctx, `INSERT INTO users (id, name, phone) VALUES (1, 'a', '+8613800000001');
		INSERT INTO wallets (user_id, balance, event_seq) VALUES (1, 300, 3)`)
	require.NoError(t, err)
	// Events at +0.5 s, +1 s and +65 s (outside the window); SMS at -1 s (a late replay),
	// +1.5 s, +9.5 s (the 8 s silence) and +70 s (more than a minute after the fault).
	for _, e := range []struct {
		seq       int
		at, smsAt time.Duration
	}{{1, 500 * time.Millisecond, 1500 * time.Millisecond}, {2, time.Second, 9500 * time.Millisecond}, {3, 65 * time.Second, 70 * time.Second}} {
		_, err := pool.Exec(ctx, `INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale, occurred_at)
			VALUES (1, $1::bigint, 'deposit', 100, 'CNY', 100 * $1::bigint, 1, '+8613800000001', 'en', $2)`, e.seq, start.Add(e.at))
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text, sent_at) VALUES (1, $1, '+8613800000001', 'x', $2)`, e.seq, start.Add(e.smsAt))
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text, late, sent_at) VALUES (1, 1, '+8613800000001', 'x', true, $1)`, start.Add(-time.Second))
	require.NoError(t, err)
	im, err := MeasureImpact(ctx, pool, start, end)
	require.NoError(t, err)
	require.Equal(t, Impact{LongestGap: 8 * time.Second, MaxLatency: 8500 * time.Millisecond, Events: 2}, im)
}

// A cluster run's plan holds a cluster's faults, one after the other, and kills each of its
// six processes.
func TestClusterPlanIsComplete(t *testing.T) {
	o := testPlan
	o.Brokers, o.Replicas = 2, 3
	require.Equal(t, Plan(7, o), Plan(7, o), "same seed, same plan")
	for seed := int64(1); seed <= 200; seed++ {
		plan := Plan(seed, o)
		kinds := map[FaultKind]int{}
		kills := map[string]int{}
		at := map[FaultKind]Fault{}
		for i, f := range plan {
			kinds[f.Kind]++
			at[f.Kind] = f
			require.True(t, f.At > 0 && f.At < o.Duration, "seed %d: %s outside the load", seed, f)
			if i > 0 {
				require.LessOrEqual(t, plan[i-1].At, f.At, "seed %d: plan not in time order", seed)
			}
			if f.Kind == Kill {
				kills[f.Slot]++
			}
		}
		require.Equal(t, map[FaultKind]int{Kill: 18, CrashBroker: 1, KillBroker: 1, JoinBroker: 1, RestartPG: 1, Failover: 1, Reshard: 1,
			ScaleDown: 1, ScaleUp: 1, GatewayOutage: 1, FreezeBroker: 1, FreezeNotifier: 1, ProviderGarble: 1, PGLock: 1}, kinds, "seed %d", seed)
		requireApart(t, seed, plan, o)
		require.Equal(t, map[string]int{"walletsvc-1": 3, "walletsvc-2": 3, "walletsvc-3": 3, "notifier-1": 3, "notifier-2": 3, "notifier-3": 3}, kills, "seed %d", seed)
		freeze, crash, pg, lock, join, dead, reshard, stall := at[FreezeBroker], at[CrashBroker], at[RestartPG], at[PGLock], at[JoinBroker], at[KillBroker], at[Reshard], at[FreezeNotifier]
		failover := at[Failover]
		require.Contains(t, []string{"broker-a", "broker-b"}, freeze.Broker)
		require.Less(t, footprint(freeze).End, crash.At, "seed %d: the freeze is over before broker-a crashes", seed)
		require.Equal(t, "broker-a", crash.Broker)
		require.True(t, crash.Down >= 5*time.Second && crash.Down <= 20*time.Second, "seed %d: %s", seed, crash)
		require.Equal(t, "immediate", pg.Mode)
		require.Equal(t, "broker-c", join.Broker)
		require.Equal(t, 8, join.Queues)
		require.Equal(t, "broker-b", dead.Broker)
		require.Equal(t, 16, reshard.Queues)
		require.Less(t, crash.At+crash.Down, pg.At, "seed %d: the crashed broker is started before Postgres stops", seed)
		require.Less(t, pg.At, join.At)
		require.Less(t, footprint(pg).End, failover.At, "seed %d: Postgres is back from its crash before it fails over", seed)
		require.Less(t, join.At, failover.At)
		require.Less(t, failover.At, dead.At)
		require.Less(t, join.At, dead.At)
		require.Less(t, dead.At, reshard.At, "seed %d: the topic grows while broker-b is down", seed)
		require.Less(t, reshard.At, lock.At)
		require.Less(t, lock.At+lock.Down, stall.At)
	}
}

// What a held lock cut off is read from the Postgres log: the cancellations in the window,
// by who cancelled them and by the table of the row they waited on.
func TestCountCutOffReadsThePostgresLog(t *testing.T) {
	t.Parallel()
	log := `2026-12-03 16:53:20.000 UTC [1] ERROR:  canceling statement due to statement timeout
2026-12-03 16:53:20.000 UTC [1] CONTEXT:  while updating tuple (1,2) in relation "wallets"
2026-12-03 16:53:24.414 UTC [16359] ERROR:  canceling statement due to user request
2026-12-03 16:53:24.414 UTC [16359] CONTEXT:  while locking tuple (4,216) in relation "progress"
2026-12-03 16:53:24.414 UTC [16359] STATEMENT:  
			WITH o AS (
			SELECT 1)
2026-12-03 16:53:24.668 UTC [16189] ERROR:  canceling statement due to statement timeout
2026-12-03 16:53:24.668 UTC [16189] CONTEXT:  while updating tuple (103,71) in relation "wallet_events"
2026-12-03 16:53:24.668 UTC [16189] STATEMENT:  
	UPDATE wallet_events e
2026-12-03 16:53:29.615 UTC [16195] ERROR:  canceling statement due to statement timeout
2026-12-03 16:53:29.615 UTC [16195] CONTEXT:  while locking tuple (0,173) in relation "wallets"
2026-12-03 16:53:29.615 UTC [16195] STATEMENT:  SELECT 1 FROM wallets WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE
2026-12-03 16:53:29.700 UTC [16196] ERROR:  canceling statement due to statement timeout
2026-12-03 16:53:29.700 UTC [16196] STATEMENT:  SELECT pg_sleep(10)
2026-12-03 16:53:30.000 UTC [16197] FATAL:  terminating connection due to idle-in-transaction timeout
2026-12-03 16:53:40.000 UTC [2] ERROR:  canceling statement due to statement timeout
2026-12-03 16:53:40.000 UTC [2] CONTEXT:  while updating tuple (1,2) in relation "wallets"
`
	path := filepath.Join(t.TempDir(), "postgres.log")
	require.NoError(t, os.WriteFile(path, []byte(log), 0o600))
	at := func(s string) time.Time {
		v, err := time.Parse(pgLogTime, s)
		require.NoError(t, err)
		return v
	}
	c, err := countCutOff(path, at("2026-12-03 16:53:24.000 UTC"), at("2026-12-03 16:53:35.000 UTC"))
	require.NoError(t, err)
	require.Equal(t, cutOff{TimedOut: 3, ClientCancelled: 1, WaitingOn: map[string]int{"progress": 1, "wallet_events": 1, "wallets": 1}, IdleSessions: 1}, c)
	require.Equal(t, "statements cut off by statement_timeout 3, by their client's deadline 1 (waiting on a row of: progress 1, wallet_events 1, wallets 1); sessions ended idle in a transaction 1", c.String())
}

// A garbled error body is what the fault promises: kilobytes of multi-byte text, a NUL, cut
// inside a character; and the provider garbles each SMS as its key decides, only while the
// fault is on: one in garbleEvery refused for good every time, garbleRetried in garbleEvery
// failed garbleTimes times and then answered as usual.
func TestTheProviderGarblesAsItsKeysDecide(t *testing.T) {
	t.Parallel()
	require.Greater(t, len(garbledBody), 4000)
	require.Contains(t, garbledBody, "\x00")
	require.False(t, utf8.ValidString(garbledBody), "cut inside a character")
	require.Less(t, strings.IndexByte(garbledBody, 0), 512, "the NUL is within what a reader keeps of a reply")
	g := newGarbler()
	require.Zero(t, g.status("deployment:7:1", 7, 1, true), "off, it garbles nothing")
	g.on.Store(true)
	statuses := map[int]int{}
	for seq := int64(1); seq <= 2000; seq++ {
		key := fmt.Sprintf("deployment:7:%d", seq)
		first := g.status(key, 7, seq, false)
		statuses[first]++
		switch first {
		case http.StatusBadRequest:
			require.Equal(t, http.StatusBadRequest, g.status(key, 7, seq, false), "refused for good")
			require.True(t, g.refusedSMS(7, seq))
		case http.StatusInternalServerError:
			for range garbleTimes - 1 {
				require.Equal(t, http.StatusInternalServerError, g.status(key, 7, seq, false))
			}
			require.Zero(t, g.status(key, 7, seq, false), "answered as usual after %d failures", garbleTimes)
			require.False(t, g.refusedSMS(7, seq))
		default:
			require.Zero(t, first)
			require.False(t, g.refusedSMS(7, seq))
		}
		require.Equal(t, http.StatusServiceUnavailable, g.status(key, 8, seq, true), "a phone configured to fail gets a garbled 503")
	}
	require.InDelta(t, 2000/garbleEvery, statuses[http.StatusBadRequest], 40)
	require.InDelta(t, 2000*garbleRetried/garbleEvery, statuses[http.StatusInternalServerError], 80)
	refused, retried := g.garbledSMS()
	require.Len(t, refused, statuses[http.StatusBadRequest])
	require.Len(t, retried, statuses[http.StatusInternalServerError])
}
