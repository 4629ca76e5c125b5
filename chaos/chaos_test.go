package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/audit"
	"github.com/walletsaga/walletsaga/internal/testdb"
)

var testPlan = PlanOptions{Duration: 3 * time.Minute, KillsEach: 3, FromQueues: 8, ToQueues: 16, GatewayOutage: time.Minute}

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
		require.Equal(t, map[FaultKind]int{Kill: 12, RestartBroker: 1, RestartPG: 1, Reshard: 1, ScaleDown: 1, ScaleUp: 1,
			ProviderDown: 1, ProviderHang: 1, GatewayOutage: 1}, kinds, "seed %d", seed)
		require.Equal(t, map[string]int{wallet1: 3, wallet2: 3, notifier1: 3, notifier2: 3}, kills, "seed %d", seed)
		require.Less(t, down, up, "seed %d: scale down before up", seed)
		for _, f := range plan {
			if f.Kind == Kill && f.Slot == notifier2 {
				require.False(t, f.At > down-5*time.Second && f.At < up+5*time.Second, "seed %d: notifier-2 killed while scaled away: %s", seed, f)
			}
		}
		gap := 18 * time.Second
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
		require.Equal(t, map[FaultKind]int{Kill: 18, CrashBroker: 1, KillBroker: 1, JoinBroker: 1, RestartPG: 1, Reshard: 1,
			ScaleDown: 1, ScaleUp: 1, GatewayOutage: 1}, kinds, "seed %d", seed)
		require.Equal(t, map[string]int{"walletsvc-1": 3, "walletsvc-2": 3, "walletsvc-3": 3, "notifier-1": 3, "notifier-2": 3, "notifier-3": 3}, kills, "seed %d", seed)
		crash, pg, join, dead, reshard := at[CrashBroker], at[RestartPG], at[JoinBroker], at[KillBroker], at[Reshard]
		require.Equal(t, "broker-a", crash.Broker)
		require.True(t, crash.Down >= 5*time.Second && crash.Down <= 20*time.Second, "seed %d: %s", seed, crash)
		require.Equal(t, "immediate", pg.Mode)
		require.Equal(t, "broker-c", join.Broker)
		require.Equal(t, 8, join.Queues)
		require.Equal(t, "broker-b", dead.Broker)
		require.Equal(t, 16, reshard.Queues)
		require.Less(t, crash.At+crash.Down, pg.At, "seed %d: the crashed broker is started before Postgres stops", seed)
		require.Less(t, pg.At, join.At)
		require.Less(t, join.At, dead.At)
		require.Less(t, dead.At, reshard.At, "seed %d: the topic grows while broker-b is down", seed)
	}
}
