package main

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWalletVsDTMIsTheWorstKindAgainstDTMsBest(t *testing.T) {
	t.Parallel()
	best := map[string]Phase{
		"deposit":  {Kind: "deposit", Clients: 32, SagasPerS: 900},
		"purchase": {Kind: "purchase", Clients: 128, SagasPerS: 600},
		"transfer": {Kind: "transfer", Clients: 8, SagasPerS: 1200},
	}
	m := &DTM{Version: dtmVersion, Phases: []DTMPhase{{Clients: 8, SagasPerS: 500}, {Clients: 32, SagasPerS: 800}, {Clients: 128, SagasPerS: 700}}}
	rt, ok := dtmRatio(best, m)
	require.True(t, ok)
	require.Equal(t, "wallet_vs_dtm", rt.Name)
	require.InDelta(t, 0.75, rt.Value, 1e-9) // purchase 600 ÷ DTM's 800
	require.Contains(t, rt.Definition, "32 clients: 800.0/s")
	require.Contains(t, rt.Definition, "the minimum is purchase")

	_, ok = dtmRatio(best, nil)
	require.False(t, ok)
	_, ok = dtmRatio(nil, m)
	require.False(t, ok)

	r := &Results{Phases: []Phase{best["deposit"], best["purchase"], best["transfer"]}, DTM: m,
		RawPG: []RawPG{{Clients: 8, TPS: 6000}}}
	r.finish()
	require.Equal(t, "wallet_vs_postgres", r.Ratios[0].Name)
	require.Equal(t, "wallet_vs_dtm", r.Ratios[1].Name)
	target := targetOf(t, r.Targets, "ratio wallet_vs_dtm (min over kinds)")
	require.Equal(t, "≥ 1.00", target.Want)
	require.False(t, target.Reached)
}

// targetOf is the target whose What starts with prefix.
func targetOf(t *testing.T, ts []Target, prefix string) Target {
	t.Helper()
	for _, g := range ts {
		if strings.HasPrefix(g.What, prefix) {
			return g
		}
	}
	require.Failf(t, "no target", "%q among %v", prefix, ts)
	return Target{}
}

// halfLoad is a recorded half-load phase: 1000 deposits at 300/s, whose figures the cases
// change one at a time.
func halfLoad() Phase {
	return Phase{Kind: "deposit", OpenRate: 300, Completed: 1000, Events: 1000,
		CPU:       CPUSample{"walletsvc": 0.3, "notifier": 0.2, "postgres": 0.5, "broker": 0.1, "bench": 0.1, "machine": 9},
		DBCommits: 3600, Probes: 200, Writes: &WriteTx{Saga: 2000, Relay: 300, Notifier: 1000},
		API: Latency{P99: 12}, E2E: Latency{P99: 40}}
}

// depositMax is the recorded closed-loop deposit maximum: 1 ms of all-process CPU per saga.
var depositMax = Phase{Kind: "deposit", Clients: 32, SagasPerS: 600, Completed: 9000,
	CPU: CPUSample{"walletsvc": 2.7, "notifier": 1.8, "postgres": 3.6, "broker": 0.45, "bench": 0.45}}

func TestHalfLoadTargetsReachedOnARecordedRun(t *testing.T) {
	t.Parallel()
	h := halfLoad()
	ts := halfLoadTargets(&h)
	require.Len(t, ts, 4)
	for _, g := range ts {
		require.True(t, g.Reached, g.What)
	}
	cpu, ok := halfLoadCPU(&h, depositMax)
	require.True(t, ok)
	require.InDelta(t, 1.2, cpu.Value, 1e-9) // 1.2 ms at half load ÷ 1.0 ms at the maximum: reported, not a target
	require.Contains(t, cpu.Definition, "1.20 ms ÷ at the deposit maximum (closed loop, 32 clients, 600.0 sagas/s): 1.00 ms")
	require.InDelta(t, 3.4, targetOf(t, ts, "DB commits per saga").Got, 1e-9)    // (3600 − 200 probes) ÷ 1000
	require.InDelta(t, 0.1, targetOf(t, ts, "read-only transactions").Got, 1e-9) // 3400 − 3300 writes
	require.Equal(t, "< 30 ms", targetOf(t, ts, "API p99").Want)
	require.Nil(t, halfLoadTargets(nil))
	_, ok = halfLoadCPU(nil, depositMax)
	require.False(t, ok)
}

func TestHalfLoadTargetsEachMissed(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		change func(*Phase)
		target string
	}{
		"commits over 3.5 per saga": {func(h *Phase) { h.DBCommits, h.Writes.Saga = 3800, 2200 }, "DB commits per saga"},
		"reads over 0.1 per saga":   {func(h *Phase) { h.Writes.Notifier = 900 }, "read-only transactions"},
		"reads not measured":        {func(h *Phase) { h.Writes = nil }, "read-only transactions"},
		"API p99 at 30 ms":          {func(h *Phase) { h.API.P99 = 30 }, "API p99"},
		"commit→SMS p99 at 100 ms":  {func(h *Phase) { h.E2E.P99 = 100 }, "p99 commit→SMS"},
		"an SMS missing":            {func(h *Phase) { h.Undelivered = 1 }, "p99 commit→SMS"},
	} {
		h := halfLoad()
		h.CPU = maps.Clone(h.CPU)
		w := *h.Writes
		h.Writes = &w
		c.change(&h)
		ts := halfLoadTargets(&h)
		require.False(t, targetOf(t, ts, c.target).Reached, name)
		for _, g := range ts {
			if !strings.HasPrefix(g.What, c.target) {
				require.True(t, g.Reached, "%s: %s", name, g.What)
			}
		}
	}
	h := halfLoad()
	h.Writes = nil
	require.Contains(t, targetOf(t, halfLoadTargets(&h), "read-only").What, "not measured")
	h.CPU = CPUSample{"walletsvc": 1.3, "notifier": 0.2}
	cpu, ok := halfLoadCPU(&h, depositMax)
	require.True(t, ok)
	require.InDelta(t, 1.5, cpu.Value, 1e-9)
}

func TestDeliveryTargetsReportTheWorstClosedLoopPhase(t *testing.T) {
	t.Parallel()
	phases := []Phase{
		{Kind: "deposit", Clients: 8, SMSPerS: 500, EventsPerS: 500, E2E: Latency{P99: 30}},
		{Kind: "transfer", Clients: 128, SMSPerS: 960, EventsPerS: 1000, E2E: Latency{P99: 800}},
		{Kind: "purchase", Clients: 32, SMSPerS: 590, EventsPerS: 600, E2E: Latency{P99: 200}},
		// Neither the half load, nor another setting counts.
		{Kind: "deposit", OpenRate: 300, SMSPerS: 100, EventsPerS: 300, E2E: Latency{P99: 5000}},
		{Kind: "deposit", Clients: 32, Setting: "durable", SMSPerS: 100, EventsPerS: 300, E2E: Latency{P99: 5000}},
	}
	ts := deliveryTargets(phases)
	require.Len(t, ts, 2)
	share, p99 := ts[0], ts[1]
	require.True(t, share.Reached)
	require.InDelta(t, 0.96, share.Got, 1e-9)
	require.Contains(t, share.What, "each of 3 closed-loop phases, worst: transfer × 128 (960.0 ÷ 1000.0)")
	require.True(t, p99.Reached)
	require.InDelta(t, 800, p99.Got, 1e-9)
	require.Contains(t, p99.What, "worst: transfer × 128")

	phases[2].SMSPerS, phases[2].E2E.P99 = 560, 1000
	ts = deliveryTargets(phases)
	require.False(t, ts[0].Reached)
	require.InDelta(t, 0.933, ts[0].Got, 1e-9)
	require.Contains(t, ts[0].What, "worst: purchase × 32")
	require.False(t, ts[1].Reached)
	require.InDelta(t, 1000, ts[1].Got, 1e-9)

	phases[2].E2E.P99 = 100
	phases[0].Undelivered = 3
	ts = deliveryTargets(phases)
	require.False(t, ts[1].Reached)
	require.Contains(t, ts[1].What, "worst: deposit × 8; 3 events without SMS")
	require.Nil(t, deliveryTargets(phases[3:]))
}

func TestDurableTargetsCompareTheSameKindAndClients(t *testing.T) {
	t.Parallel()
	phases := []Phase{
		{Kind: "deposit", Clients: 8, SagasPerS: 900},
		{Kind: "deposit", Clients: 32, SagasPerS: 1000},
		{Kind: "purchase", Clients: 32, SagasPerS: 800},
		{Kind: "deposit", Clients: 32, Setting: "durable", SagasPerS: 650},
		{Kind: "purchase", Clients: 32, Setting: "durable", SagasPerS: 400},
		{Kind: "deposit", Clients: 32, Setting: "durable, commit_delay 200µs", SagasPerS: 700},
		{Kind: "transfer", Clients: 32, Setting: "durable", SagasPerS: 700},
	}
	ts := durableTargets(phases)
	require.Len(t, ts, 4)
	require.Equal(t, "sagas/s durable ÷ default, deposit × 32: 650.0 ÷ 1000.0", ts[0].What)
	require.InDelta(t, 0.65, ts[0].Got, 1e-9)
	require.True(t, ts[0].Reached)
	require.InDelta(t, 0.5, ts[1].Got, 1e-9)
	require.False(t, ts[1].Reached)
	require.Contains(t, ts[2].What, "durable, commit_delay 200µs ÷ default, deposit × 32")
	require.True(t, ts[2].Reached)
	require.Contains(t, ts[3].What, "no default phase")
	require.False(t, ts[3].Reached)
}

func TestRatioTargetsWantTheIssuesFloors(t *testing.T) {
	t.Parallel()
	best := map[string]Phase{"deposit": {Kind: "deposit", Clients: 32, SagasPerS: 1100}, "purchase": {Kind: "purchase", Clients: 32, SagasPerS: 1000}}
	m := &DTM{Version: dtmVersion, Phases: []DTMPhase{{Clients: 32, SagasPerS: 900}}}
	finish := func(rawTPS float64) *Results {
		r := &Results{Phases: []Phase{best["deposit"], best["purchase"]}, DTM: m, RawPG: []RawPG{{Clients: 8, TPS: rawTPS}}}
		r.finish()
		return r
	}
	r := finish(5000) // 1000 ÷ 5000 = 0.20
	pg := targetOf(t, r.Targets, "ratio wallet_vs_postgres")
	require.Equal(t, "≥ 0.18", pg.Want)
	require.True(t, pg.Reached)
	require.True(t, targetOf(t, r.Targets, "ratio wallet_vs_dtm").Reached)                  // 1000 ÷ 900
	require.False(t, targetOf(t, finish(6000).Targets, "ratio wallet_vs_postgres").Reached) // 0.17

	rt, ok := dtmRatio(best, m)
	require.True(t, ok)
	lost := maps.Clone(best)
	p := lost["purchase"]
	p.Undelivered = 2
	lost["purchase"] = p
	g := dtmTarget(rt, lost)
	require.False(t, g.Reached)
	require.Contains(t, g.What, "(2 were not)")
}

func TestDurableRatiosComeOnePerSetting(t *testing.T) {
	t.Parallel()
	gc := groupCommit{Delay: 500 * time.Microsecond, Siblings: 5}.name()
	r := &Results{
		RawPG: []RawPG{{Clients: 8, TPS: 5000}, {Clients: 32, TPS: 6000}, {Clients: 32, TPS: 1000, Setting: "durable"}, {Clients: 32, TPS: 1600, Setting: gc}},
		Phases: []Phase{
			{Kind: "deposit", Clients: 32, SagasPerS: 1200}, {Kind: "purchase", Clients: 32, SagasPerS: 1100},
			{Kind: "deposit", Clients: 32, SagasPerS: 400, Setting: "durable"}, {Kind: "purchase", Clients: 32, SagasPerS: 300, Setting: "durable"},
			{Kind: "deposit", Clients: 32, SagasPerS: 800, Setting: gc}, {Kind: "purchase", Clients: 32, SagasPerS: 700, Setting: gc},
		},
	}
	r.finish()
	ratios := map[string]float64{}
	for _, rt := range r.Ratios {
		ratios[rt.Name] = rt.Value
	}
	require.InDelta(t, 1100.0/6000, ratios["wallet_vs_postgres"], 0.005) // the durable raw runs are not the default's ceiling
	require.InDelta(t, 0.3, ratios["wallet_vs_postgres_durable"], 1e-9)
	require.InDelta(t, 700.0/1600, ratios["wallet_vs_postgres_durable_commit_delay_500us_siblings_5"], 0.005)
	require.False(t, targetOf(t, r.Targets, "sagas/s durable ÷ default, purchase × 32").Reached) // 300 ÷ 1100
	require.True(t, targetOf(t, r.Targets, "sagas/s "+gc+" ÷ default, deposit × 32").Reached)    // 800 ÷ 1200
}

func TestLaneTargetsWantTheIssuesLimitsAndSomethingMeasured(t *testing.T) {
	t.Parallel()
	targets := func(i Isolation, o Outage) []Target {
		r := &Results{Lanes: &LaneBench{Isolation: &i, Outage: &o}}
		r.laneTargets()
		return r.Targets
	}
	iso := Isolation{RatePerS: 300, Events: 4000, E2E: Latency{P99: 80}}
	out := Outage{OutageSecs: 30, Events: 12000, Delivered: 12000, RecoverySecs: 4.2}
	ts := targets(iso, out)
	require.Len(t, ts, 3)
	for _, g := range ts {
		require.True(t, g.Reached, g.What)
	}
	require.Equal(t, "< 100 ms", ts[0].Want)
	require.Equal(t, "every SMS delivered after a 30 s provider outage, within (s) of the recovery", ts[2].What)
	require.Equal(t, "≤ 5", ts[2].Want)

	slowIso, lateOut := iso, out
	slowIso.E2E.P99, lateOut.RecoverySecs = 100, 5.2
	ts = targets(slowIso, lateOut)
	require.False(t, ts[0].Reached)
	require.True(t, ts[1].Reached)
	require.False(t, ts[2].Reached)

	// A run that measured nothing (no event committed) reaches none.
	ts = targets(Isolation{RatePerS: 300}, Outage{OutageSecs: 30})
	for _, g := range ts {
		require.False(t, g.Reached, g.What)
	}
}

func TestEqualWorkRatiosAndTargets(t *testing.T) {
	t.Parallel()
	phases := []Phase{
		{Kind: "deposit", Clients: 8, SagasPerS: 500, Completed: 7500, CPU: CPUSample{"postgres": 6}, Rows: &RowWrites{WALBytes: 7500 * 4000,
			Tables: []TableWrites{{Table: "sagas", Inserted: 7500, Updated: 7500, IndexEntries: 30000}, {Table: "wallets", HOT: 7500}}}},
		{Kind: "deposit", Clients: 32, SagasPerS: 700, Completed: 10500},
		{Kind: "purchase", Clients: 8, SagasPerS: 400, Completed: 6000},
		{Kind: "purchase", Clients: 32, SagasPerS: 900, Completed: 13500},
		{Kind: "transfer", Clients: 8, SagasPerS: 450, Completed: 6750, Undelivered: 3},
		{Kind: "transfer", Clients: 32, SagasPerS: 800, Completed: 12000},
		{Kind: "deposit", Clients: 8, Setting: "durable", SagasPerS: 100, Completed: 1500},
	}
	r := &Results{Phases: phases, DTM: &DTM{Version: "v1", WorkCheck: "consistent",
		Work: []DTMPhase{{Clients: 8, SagasPerS: 800}, {Clients: 32, SagasPerS: 875}}}}
	ts := r.equalWorkTargets(r.bestByKind(""))
	require.Len(t, ts, 3)
	top := targetOf(t, ts, "ratio wallet_vs_dtm_equal (best")
	require.InDelta(t, 0.8, top.Got, 1e-9) // min(700, 900, 800) ÷ 875
	require.False(t, top.Reached)
	at8 := targetOf(t, ts, "ratio wallet_vs_dtm_equal at 8")
	require.InDelta(t, 0.5, at8.Got, 1e-9) // purchase 400 ÷ 800; the durable phase left out
	require.Contains(t, at8.What, "3 were not")
	pg := targetOf(t, ts, "Postgres CPU ms per deposit at 8")
	require.InDelta(t, 0.8, pg.Got, 1e-9) // 6 s ÷ 7500
	require.True(t, pg.Reached)
	require.Contains(t, pg.What, "3.0 rows written, 4.0 index entries, 4000 WAL bytes")
	require.Len(t, r.Ratios, 2)

	r.DTM.Work[1].SagasPerS, r.DTM.Work[0].SagasPerS = 600, 350
	r.Phases[4].Undelivered = 0
	r.Ratios = nil
	ts = r.equalWorkTargets(r.bestByKind(""))
	require.True(t, targetOf(t, ts, "ratio wallet_vs_dtm_equal (best").Reached)
	require.True(t, targetOf(t, ts, "ratio wallet_vs_dtm_equal at 8").Reached)

	r.DTM = nil
	require.Len(t, r.equalWorkTargets(r.bestByKind("")), 1) // Postgres CPU only
}
