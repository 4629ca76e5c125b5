package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Results is everything one run measured; it is written as JSON as is.
type Results struct {
	Started  time.Time      `json:"started"`
	Seconds  float64        `json:"seconds"`
	Machine  Machine        `json:"machine"`
	Settings map[string]any `json:"settings"`

	RawPG           []RawPG   `json:"raw_postgres"`
	RawPGCPU        CPUSample `json:"raw_postgres_cpu_s,omitempty"`
	RawPGOthers     float64   `json:"raw_postgres_others_cpu_share"`
	PGBench         []PGBench `json:"pgbench,omitempty"`
	RawMQ           *RawMQ    `json:"raw_rocketmq,omitempty"`
	RawMQSendCPU    CPUSample `json:"raw_rocketmq_send_cpu_s,omitempty"`
	RawMQConsumeCPU CPUSample `json:"raw_rocketmq_consume_cpu_s,omitempty"`

	Phases   []Phase            `json:"product_phases"`
	HalfLoad *Phase             `json:"half_load,omitempty"`
	DTM      *DTM               `json:"dtm,omitempty"`
	PeakRSS  map[string]float64 `json:"peak_rss_mib,omitempty"`

	NotifyDrain *NotifyDrain  `json:"notifier_drain,omitempty"`
	Slow        *SlowProvider `json:"slow_provider,omitempty"`
	Lanes       *LaneBench    `json:"lanes,omitempty"`

	Ratios   []Ratio  `json:"ratios"`
	Targets  []Target `json:"targets"`
	Profiles []string `json:"cpu_profiles,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Ratio is one of the two headline ratios.
type Ratio struct {
	Name       string  `json:"name"`
	Value      float64 `json:"value"`
	Definition string  `json:"definition"`
}

// Target is one of the bench's targets (its report's "Targets" table) and whether this run
// reached it.
type Target struct {
	What    string  `json:"what"`
	Want    string  `json:"want"`
	Got     float64 `json:"got"`
	Reached bool    `json:"reached"`
}

// finish computes the ratios and checks the targets.
func (r *Results) finish() {
	bestRaw, bestRawC := 0.0, 0
	durableRaw := 0.0
	for _, p := range r.RawPG {
		switch {
		case p.Setting == "durable":
			durableRaw = max(durableRaw, p.TPS)
		case p.TPS > bestRaw:
			bestRaw, bestRawC = p.TPS, p.Clients
		}
	}
	bestPgbench := 0.0
	for _, p := range r.PGBench {
		bestPgbench = max(bestPgbench, p.TPS)
	}
	best := r.bestByKind("")
	if bestRaw > 0 && len(best) > 0 {
		minKind, minRate := "", 0.0
		var per []string
		for _, k := range []string{"deposit", "purchase", "transfer"} {
			p, ok := best[k]
			if !ok {
				continue
			}
			if minKind == "" || p.SagasPerS < minRate {
				minKind, minRate = k, p.SagasPerS
			}
			v := round2(p.SagasPerS / bestRaw)
			per = append(per, fmt.Sprintf("%s %.2f (%.1f/s at %d clients)", k, v, p.SagasPerS, p.Clients))
			r.Ratios = append(r.Ratios, Ratio{Name: "wallet_vs_postgres_" + k, Value: v, Definition: fmt.Sprintf(
				"best completed %s sagas/s at any client count (%d clients: %.1f/s) ÷ best raw wallet-step tx/s (%d clients: %.1f/s)", k, p.Clients, p.SagasPerS, bestRawC, bestRaw)})
		}
		v := round2(minRate / bestRaw)
		r.Ratios = append([]Ratio{{Name: "wallet_vs_postgres", Value: v, Definition: fmt.Sprintf(
			"the MINIMUM over kinds of each kind's best completed sagas/s (each request with ?wait=true and an Idempotency-Key) ÷ best raw wallet-step transactions/s of the same run (%d clients: %.1f/s; pgx: UPDATE one row + INSERT two rows + COMMIT, same cluster); the minimum is %s; per kind: %s",
			bestRawC, bestRaw, minKind, strings.Join(per, ", "))}}, r.Ratios...)
		r.Targets = append(r.Targets, Target{What: "ratio wallet_vs_postgres (min over kinds)", Want: "≥ 0.50", Got: v, Reached: v >= 0.5})
		if bestPgbench > 0 {
			r.Ratios = append(r.Ratios, Ratio{Name: "wallet_vs_pgbench", Value: round2(minRate / bestPgbench), Definition: fmt.Sprintf(
				"the same minimum (%s, %.1f/s) ÷ pgbench's best TPC-B-like tps (%.1f)", minKind, minRate, bestPgbench)})
		}
	}
	if rt, ok := dtmRatio(best, r.DTM); ok {
		// Beside wallet_vs_postgres, the headline.
		at := 0
		if len(r.Ratios) > 0 && r.Ratios[0].Name == "wallet_vs_postgres" {
			at = 1
		}
		r.Ratios = slices.Insert(r.Ratios, at, rt)
		r.Targets = append(r.Targets, Target{What: "ratio wallet_vs_dtm (min over kinds)", Want: "≥ 1.00", Got: rt.Value, Reached: rt.Value >= 1})
	}
	if durable := r.bestByKind("durable"); durableRaw > 0 && len(durable) > 0 {
		minRate := -1.0
		for _, p := range durable {
			if minRate < 0 || p.SagasPerS < minRate {
				minRate = p.SagasPerS
			}
		}
		r.Ratios = append(r.Ratios, Ratio{Name: "wallet_vs_postgres_durable", Value: round2(minRate / durableRaw), Definition: fmt.Sprintf(
			"with fsync and synchronous_commit on: the minimum over deposit and purchase of completed sagas/s (%.1f) ÷ the raw wallet-step tx/s with the same settings (%.1f)", minRate, durableRaw)})
	}
	for _, k := range []string{"deposit", "purchase"} {
		if p, ok := best[k]; ok {
			r.Targets = append(r.Targets, Target{What: k + " sagas/s (best)", Want: "> 1100", Got: p.SagasPerS, Reached: p.SagasPerS > 1100})
		}
	}
	for _, k := range []string{"deposit", "purchase", "transfer"} {
		p, ok := best[k]
		if !ok || p.Writes == nil || p.Completed == 0 {
			continue
		}
		want := 2.0
		if k == "transfer" {
			want = 1
		}
		w := round2(float64(p.Writes.Saga) / float64(p.Completed))
		r.Targets = append(r.Targets, Target{What: k + " write transactions per saga (wallet and saga tables)", Want: fmt.Sprintf("≤ %.0f", want), Got: w, Reached: w <= want+0.05})
		if c := p.CPU["walletsvc"]; c > 0 {
			ms := round2(c * 1000 / float64(p.Completed))
			r.Targets = append(r.Targets, Target{What: k + " walletsvc CPU ms per saga (best phase)", Want: "≤ 0.50", Got: ms, Reached: ms <= 0.5})
		}
	}
	if n, m := r.NotifyDrain, r.RawMQ; n != nil && m != nil && m.ConsumeRate > 0 && m.SendRate > 0 {
		ceiling := min(m.SendRate, m.ConsumeRate)
		v := round2(n.SMSPerS / ceiling)
		r.Ratios = append(r.Ratios, Ratio{Name: "notify_vs_broker", Value: v, Definition: fmt.Sprintf(
			"notifier SMS/s draining the raw run's backlog (same topic: 8 queues, %d users, %d messages; log sender, fresh database: %.1f/s) ÷ the broker's ordered ceiling = min(raw ordered SendSync msg/s with %d senders, raw orderly consumption msg/s of that backlog by the same consumer harness with a no-op handler) = min(%.1f, %.1f)",
			m.Users, m.Sent, n.SMSPerS, m.Senders, m.SendRate, m.ConsumeRate)})
		r.Targets = append(r.Targets, Target{What: "ratio notify_vs_broker", Want: "≥ 0.70", Got: v, Reached: v >= 0.7})
		r.Notes = append(r.Notes, fmt.Sprintf("against orderly consumption alone (%.1f msg/s) the notifier reaches %.3f", m.ConsumeRate, n.SMSPerS/m.ConsumeRate))
	}
	if h := r.HalfLoad; h != nil {
		r.Targets = append(r.Targets, Target{What: fmt.Sprintf("API p99 at half max load (deposits, open loop %.1f/s)", h.OpenRate),
			Want: "< 20 ms", Got: h.API.P99, Reached: h.API.P99 > 0 && h.API.P99 < 20})
		r.Targets = append(r.Targets, Target{What: fmt.Sprintf("p99 commit→SMS at half max load (deposits, open loop %.1f/s)", h.OpenRate),
			Want: "< 100 ms", Got: h.E2E.P99, Reached: h.E2E.P99 > 0 && h.E2E.P99 < 100 && h.Undelivered == 0})
	}
	r.laneTargets()
}

// dtmRatio is wallet_vs_dtm: the minimum over kinds of each kind's best completed sagas/s ÷
// DTM's best sagas/s in the same run; not ok without both.
func dtmRatio(best map[string]Phase, m *DTM) (Ratio, bool) {
	if m == nil || len(best) == 0 {
		return Ratio{}, false
	}
	var top DTMPhase
	for _, p := range m.Phases {
		if p.SagasPerS > top.SagasPerS {
			top = p
		}
	}
	if top.SagasPerS <= 0 {
		return Ratio{}, false
	}
	minKind, minRate := "", 0.0
	var per []string
	for _, k := range []string{"deposit", "purchase", "transfer"} {
		p, ok := best[k]
		if !ok {
			continue
		}
		if minKind == "" || p.SagasPerS < minRate {
			minKind, minRate = k, p.SagasPerS
		}
		per = append(per, fmt.Sprintf("%s %.2f (%.1f/s at %d clients)", k, p.SagasPerS/top.SagasPerS, p.SagasPerS, p.Clients))
	}
	return Ratio{Name: "wallet_vs_dtm", Value: round2(minRate / top.SagasPerS), Definition: fmt.Sprintf(
		"the MINIMUM over kinds of each kind's best completed sagas/s ÷ DTM %s's best completed sagas/s in the same run (%d clients: %.1f/s; sagas of two no-op HTTP branches through dtmcli with WaitResult, DTM's store on the same cluster); the minimum is %s; per kind: %s",
		m.Version, top.Clients, top.SagasPerS, minKind, strings.Join(per, ", "))}, true
}

// bestByKind returns, per kind, the closed-loop phase with the most completed sagas/s among
// the phases of one setting ("" = the default).
func (r *Results) bestByKind(setting string) map[string]Phase {
	best := map[string]Phase{}
	for _, p := range r.Phases {
		if p.Setting != setting || p.OpenRate > 0 {
			continue
		}
		if b, ok := best[p.Kind]; !ok || p.SagasPerS > b.SagasPerS {
			best[p.Kind] = p
		}
	}
	return best
}

// commits are the product's transactions over the phase's span: the database's, less the
// bench's probes.
func (p Phase) commits() int64 { return p.DBCommits - p.Probes }

// writeAndReadTx are the phase's write transactions (from the WAL) and the product's
// read-only ones (its commits less those); not ok when the WAL was not read.
func (p Phase) writeAndReadTx() (WriteTx, int64, bool) {
	if p.Writes == nil {
		return WriteTx{}, 0, false
	}
	return *p.Writes, p.commits() - p.Writes.All(), true
}
