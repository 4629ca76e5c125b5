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
	Abuse       *Abuse        `json:"abuse,omitempty"`

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
	durableRaw := map[string]float64{} // by setting
	var durableSettings []string
	for _, p := range r.RawPG {
		switch {
		case p.Setting != "":
			if _, ok := durableRaw[p.Setting]; !ok {
				durableSettings = append(durableSettings, p.Setting)
			}
			durableRaw[p.Setting] = max(durableRaw[p.Setting], p.TPS)
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
		r.Targets = append(r.Targets, Target{What: "ratio wallet_vs_postgres (min over kinds)", Want: "≥ 0.18", Got: v, Reached: v >= 0.18})
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
		r.Targets = append(r.Targets, dtmTarget(rt, best))
	}
	for _, setting := range durableSettings {
		durable := r.bestByKind(setting)
		if durableRaw[setting] <= 0 || len(durable) == 0 {
			continue
		}
		minRate := -1.0
		for _, p := range durable {
			if minRate < 0 || p.SagasPerS < minRate {
				minRate = p.SagasPerS
			}
		}
		r.Ratios = append(r.Ratios, Ratio{Name: "wallet_vs_postgres_" + ratioSuffix(setting), Value: round2(minRate / durableRaw[setting]), Definition: fmt.Sprintf(
			"with %s: the minimum over deposit and purchase of completed sagas/s (%.1f) ÷ the raw wallet-step tx/s with the same settings (%.1f)",
			strings.Replace(setting, "durable", "fsync and synchronous_commit on", 1), minRate, durableRaw[setting])})
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
	r.Targets = append(r.Targets, halfLoadTargets(r.HalfLoad)...)
	if rt, ok := halfLoadCPU(r.HalfLoad, best["deposit"]); ok {
		r.Ratios = append(r.Ratios, rt)
	}
	r.Targets = append(r.Targets, r.equalWorkTargets(best)...)
	r.Targets = append(r.Targets, deliveryTargets(r.Phases)...)
	r.Targets = append(r.Targets, durableTargets(r.Phases)...)
	r.laneTargets()
	r.Targets = append(r.Targets, abuseTargets(r.Abuse)...)
}

// ratioSuffix turns a setting's label into a ratio's name: "durable, commit_delay 500µs
// (siblings 5)" → "durable_commit_delay_500us_siblings_5".
func ratioSuffix(setting string) string {
	f := strings.FieldsFunc(strings.ReplaceAll(setting, "µs", "us"), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	})
	return strings.Join(f, "_")
}

// stackProcs are the processes whose CPU makes a phase's all-process CPU: everything a saga
// costs on the machine, the load generator included.
var stackProcs = []string{"walletsvc", "notifier", "postgres", "broker", "bench"}

// cpuAll is the phase's all-process CPU, in seconds.
func (p Phase) cpuAll() float64 {
	var s float64
	for _, k := range stackProcs {
		s += p.CPU[k]
	}
	return s
}

// cpuMSPerSaga is the all-process CPU per completed saga, in ms; 0 when none completed.
func (p Phase) cpuMSPerSaga() float64 {
	if p.Completed <= 0 {
		return 0
	}
	return round2(p.cpuAll() * 1000 / float64(p.Completed))
}

// smsShare is the phase's SMS/s ÷ its events/s, both over the phase's window; 0 without
// events.
func (p Phase) smsShare() float64 {
	if p.EventsPerS <= 0 {
		return 0
	}
	return round3(p.SMSPerS / p.EventsPerS)
}

// Limits of the targets on half load, the closed-loop phases' delivery and durability.
const (
	halfLoadCommits = 3.5  // DB commits per deposit saga
	halfLoadReads   = 0.1  // read-only transactions per saga
	halfLoadAPIP99  = 30.0 // ms
	halfLoadE2EP99  = 100.0
	phaseSMSShare   = 0.95   // SMS/s ÷ events/s within a closed-loop phase
	phaseE2EP99     = 1000.0 // ms
	durableShare    = 0.6    // durable sagas/s ÷ the default's, same kind and clients
)

// halfLoadTargets are the targets on the half-load phase h (deposits, open loop at half the
// deposit maximum): commits and read-only transactions per saga, API and commit→SMS p99.
func halfLoadTargets(h *Phase) []Target {
	if h == nil {
		return nil
	}
	at := fmt.Sprintf("at half load (deposits, open loop %.1f/s)", h.OpenRate)
	done := h.Completed > 0
	commits := Target{What: "DB commits per saga " + at + ", the bench's probes left out", Want: fmt.Sprintf("≤ %.1f", halfLoadCommits)}
	if done {
		commits.Got = round2(float64(h.commits()) / float64(h.Completed))
		commits.Reached = commits.Got <= halfLoadCommits
	}
	reads := Target{What: "read-only transactions per saga " + at + ", the bench's probes left out", Want: fmt.Sprintf("≤ %.1f", halfLoadReads)}
	if _, n, ok := h.writeAndReadTx(); !ok {
		reads.What += " (not measured: the WAL was not read)"
	} else if done {
		reads.Got = round2(float64(n) / float64(h.Completed))
		reads.Reached = reads.Got <= halfLoadReads
	}
	return []Target{commits, reads,
		{What: "API p99 " + at, Want: fmt.Sprintf("< %.0f ms", halfLoadAPIP99), Got: h.API.P99,
			Reached: done && h.API.P99 > 0 && h.API.P99 < halfLoadAPIP99},
		{What: "p99 commit→SMS " + at, Want: fmt.Sprintf("< %.0f ms", halfLoadE2EP99), Got: h.E2E.P99,
			Reached: done && h.E2E.P99 > 0 && h.E2E.P99 < halfLoadE2EP99 && h.Undelivered == 0}}
}

// deliveryTargets are the targets every closed-loop phase of the default setting must
// reach, each reported for the worst phase: SMS/s ≥ 95 % of events/s within the phase, and
// commit→SMS p99 < 1 s with every SMS delivered.
func deliveryTargets(phases []Phase) []Target {
	var (
		n                    int
		worstShare, worstP99 Phase
		undelivered          int64
	)
	for _, p := range phases {
		if p.Setting != "" || p.OpenRate > 0 {
			continue
		}
		if n == 0 || p.smsShare() < worstShare.smsShare() {
			worstShare = p
		}
		if n == 0 || laterSMS(p, worstP99) {
			worstP99 = p
		}
		undelivered += p.Undelivered
		n++
	}
	if n == 0 {
		return nil
	}
	share := Target{What: fmt.Sprintf("SMS/s ÷ events/s within each of %d closed-loop phases, worst: %s (%.1f ÷ %.1f)",
		n, worstShare.label(), worstShare.SMSPerS, worstShare.EventsPerS), Want: fmt.Sprintf("≥ %.2f", phaseSMSShare), Got: worstShare.smsShare()}
	share.Reached = share.Got >= phaseSMSShare
	p99 := Target{What: fmt.Sprintf("commit→SMS p99 of each of %d closed-loop phases, worst: %s", n, worstP99.label()),
		Want: fmt.Sprintf("< %.0f ms", phaseE2EP99), Got: worstP99.E2E.P99}
	if undelivered > 0 {
		p99.What += fmt.Sprintf("; %d events without SMS", undelivered)
	}
	p99.Reached = undelivered == 0 && worstP99.E2E.P99 > 0 && worstP99.E2E.P99 < phaseE2EP99
	return []Target{share, p99}
}

// laterSMS says whether p's SMS came later than w's: a phase with events left without SMS
// before one without, then the higher commit→SMS p99.
func laterSMS(p, w Phase) bool {
	if lost := p.Undelivered > 0; lost != (w.Undelivered > 0) {
		return lost
	}
	return p.E2E.P99 > w.E2E.P99
}

// durableTargets compare each durable phase (fsync and synchronous_commit on, with or
// without group commit) with the default phase of the same kind and clients: sagas/s ≥ 0.6
// of it.
func durableTargets(phases []Phase) []Target {
	var out []Target
	for _, p := range phases {
		if !strings.HasPrefix(p.Setting, "durable") || p.OpenRate > 0 {
			continue
		}
		t := Target{What: fmt.Sprintf("sagas/s %s ÷ default, %s × %d", p.Setting, p.Kind, p.Clients), Want: fmt.Sprintf("≥ %.2f", durableShare)}
		i := slices.IndexFunc(phases, func(d Phase) bool {
			return d.Setting == "" && d.OpenRate == 0 && d.Kind == p.Kind && d.Clients == p.Clients
		})
		if i < 0 || phases[i].SagasPerS <= 0 {
			t.What += " (no default phase to compare with)"
		} else {
			t.What += fmt.Sprintf(": %.1f ÷ %.1f", p.SagasPerS, phases[i].SagasPerS)
			t.Got = round2(p.SagasPerS / phases[i].SagasPerS)
			t.Reached = t.Got >= durableShare
		}
		out = append(out, t)
	}
	return out
}

// dtmTarget is wallet_vs_dtm ≥ 1 with every SMS of the phases it compares delivered.
func dtmTarget(rt Ratio, best map[string]Phase) Target {
	var undelivered int64
	for _, p := range best {
		undelivered += p.Undelivered
	}
	t := Target{What: "ratio wallet_vs_dtm (min over kinds), every SMS of those phases delivered", Want: "≥ 1.00", Got: rt.Value,
		Reached: rt.Value >= 1 && undelivered == 0}
	if undelivered > 0 {
		t.What += fmt.Sprintf(" (%d were not)", undelivered)
	}
	return t
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

// halfLoadCPU is the all-process CPU per saga at half load ÷ at the deposit maximum (top,
// the closed-loop deposit phase of the most sagas/s): reported, no longer a target (what
// users feel, latency at half load, is).
func halfLoadCPU(h *Phase, top Phase) (Ratio, bool) {
	if h == nil {
		return Ratio{}, false
	}
	half, full := h.cpuMSPerSaga(), top.cpuMSPerSaga()
	if half <= 0 || full <= 0 {
		return Ratio{}, false
	}
	return Ratio{Name: "cpu_half_vs_max", Value: round2(half / full), Definition: fmt.Sprintf(
		"all-process CPU per saga at half load (deposits, open loop %.1f/s): %.2f ms ÷ at the deposit maximum (closed loop, %d clients, %.1f sagas/s): %.2f ms",
		h.OpenRate, half, top.Clients, top.SagasPerS, full)}, true
}

// Equal-work targets: the product against DTM doing the deposit's own work, and Postgres's
// CPU per deposit at 8 clients.
const (
	equalWorkClients   = 8
	postgresMSDeposit8 = 1.0
)

// equalWorkRatios are wallet_vs_dtm_equal (each kind's best ÷ DTM's best doing the wallet's
// work, the minimum over kinds) and the same at 8 clients; not ok without both sides.
func equalWorkRatios(phases []Phase, best map[string]Phase, m *DTM) (top, at8 Ratio, ok bool) {
	if m == nil || len(m.Work) == 0 || len(best) == 0 {
		return top, at8, false
	}
	var dtmTop, dtm8 DTMPhase
	for _, p := range m.Work {
		if p.SagasPerS > dtmTop.SagasPerS {
			dtmTop = p
		}
		if p.Clients == equalWorkClients {
			dtm8 = p
		}
	}
	if dtmTop.SagasPerS <= 0 {
		return top, at8, false
	}
	minKind, minRate := "", 0.0
	var per []string
	for _, k := range []string{"deposit", "purchase", "transfer"} {
		p, found := best[k]
		if !found {
			continue
		}
		if minKind == "" || p.SagasPerS < minRate {
			minKind, minRate = k, p.SagasPerS
		}
		per = append(per, fmt.Sprintf("%s %.2f (%.1f/s at %d clients)", k, p.SagasPerS/dtmTop.SagasPerS, p.SagasPerS, p.Clients))
	}
	top = Ratio{Name: "wallet_vs_dtm_equal", Value: round2(minRate / dtmTop.SagasPerS), Definition: fmt.Sprintf(
		"the MINIMUM over kinds of each kind's best completed sagas/s ÷ DTM %s's best doing the deposit's business work (%d clients: %.1f/s; a charge kept in memory, and the credit under DTM's barrier: balance, ledger and outbox rows in one statement on the wallet's own tables; %s); the minimum is %s; per kind: %s",
		m.Version, dtmTop.Clients, dtmTop.SagasPerS, m.WorkCheck, minKind, strings.Join(per, ", "))}
	at8 = Ratio{Name: "wallet_vs_dtm_equal_at_8", Value: -1}
	if dtm8.SagasPerS > 0 {
		minKind, minRate, per = "", 0, nil
		for _, p := range phases {
			if p.Setting != "" || p.OpenRate > 0 || p.Clients != equalWorkClients {
				continue
			}
			if minKind == "" || p.SagasPerS < minRate {
				minKind, minRate = p.Kind, p.SagasPerS
			}
			per = append(per, fmt.Sprintf("%s %.2f (%.1f/s)", p.Kind, p.SagasPerS/dtm8.SagasPerS, p.SagasPerS))
		}
		if minKind != "" {
			at8.Value = round2(minRate / dtm8.SagasPerS)
			at8.Definition = fmt.Sprintf("at %d clients: the minimum over kinds of completed sagas/s ÷ DTM doing the wallet's work at %d clients (%.1f/s); the minimum is %s; per kind: %s",
				equalWorkClients, equalWorkClients, dtm8.SagasPerS, minKind, strings.Join(per, ", "))
		}
	}
	return top, at8, true
}

// equalWorkTargets are wallet_vs_dtm_equal ≥ 1 at the best rate and at 8 clients, with every
// SMS of the compared phases delivered, and Postgres CPU per deposit at 8 clients (with the
// rows and WAL each of those deposits wrote).
func (r *Results) equalWorkTargets(best map[string]Phase) []Target {
	var out []Target
	if top, at8, ok := equalWorkRatios(r.Phases, best, r.DTM); ok {
		r.Ratios = append(r.Ratios, top)
		if at8.Value >= 0 {
			r.Ratios = append(r.Ratios, at8)
		}
		var undelivered, undelivered8 int64
		for _, p := range best {
			undelivered += p.Undelivered
		}
		for _, p := range r.Phases {
			if p.Setting == "" && p.OpenRate == 0 && p.Clients == equalWorkClients {
				undelivered8 += p.Undelivered
			}
		}
		t := Target{What: "ratio wallet_vs_dtm_equal (best rates), every SMS of those phases delivered", Want: "≥ 1.00", Got: top.Value,
			Reached: top.Value >= 1 && undelivered == 0}
		if undelivered > 0 {
			t.What += fmt.Sprintf(" (%d were not)", undelivered)
		}
		t8 := Target{What: fmt.Sprintf("ratio wallet_vs_dtm_equal at %d clients, every SMS of those phases delivered", equalWorkClients), Want: "≥ 1.00", Got: at8.Value,
			Reached: at8.Value >= 1 && undelivered8 == 0}
		if undelivered8 > 0 {
			t8.What += fmt.Sprintf(" (%d were not)", undelivered8)
		}
		out = append(out, t, t8)
	}
	for _, p := range r.Phases {
		if p.Setting != "" || p.OpenRate > 0 || p.Kind != "deposit" || p.Clients != equalWorkClients || p.Completed == 0 {
			continue
		}
		ms := round2(p.CPU["postgres"] * 1000 / float64(p.Completed))
		t := Target{What: fmt.Sprintf("Postgres CPU ms per deposit at %d clients", equalWorkClients), Want: fmt.Sprintf("≤ %.1f", postgresMSDeposit8), Got: ms,
			Reached: ms > 0 && ms <= postgresMSDeposit8}
		if p.Rows != nil {
			all := p.Rows.Total()
			n := float64(p.Completed)
			t.What += fmt.Sprintf(" (per deposit: %.1f rows written, %.1f index entries, %.0f WAL bytes)", float64(all.Rows())/n, float64(all.IndexEntries)/n, float64(p.Rows.WALBytes)/n)
		}
		out = append(out, t)
	}
	return out
}
