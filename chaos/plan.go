package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The four service processes of the run: two wallet replicas and two notifiers in one group.
const (
	wallet1   = "walletsvc-1"
	wallet2   = "walletsvc-2"
	notifier1 = "notifier-1"
	notifier2 = "notifier-2"
)

var slotNames = []string{wallet1, wallet2, notifier1, notifier2}

// FaultKind is one kind of thing the run does to the stack.
type FaultKind string

const (
	Kill          FaultKind = "kill"           // SIGKILL a service process, restart it after a delay
	RestartBroker FaultKind = "restart-broker" // stop the broker (SIGTERM) and start it again
	RestartPG     FaultKind = "restart-pg"     // restart Postgres, cutting every session
	ScaleDown     FaultKind = "scale-down"     // stop notifier-2 gracefully: 2 → 1 notifiers
	ScaleUp       FaultKind = "scale-up"       // start notifier-2 again: 1 → 2
	Reshard       FaultKind = "reshard"        // raise the topic's queues (keys move to other queues)
	ProviderDown  FaultKind = "provider-down"  // the SMS provider answers 503 to everyone for Down
	ProviderHang  FaultKind = "provider-hang"  // the SMS provider answers nothing for Down (every call times out)
	// GatewayOutage makes the payment gateway simulator fail (or hang, Mode "timeout") every
	// call for Down, in both wallet replicas (the switch is a row in their database).
	GatewayOutage FaultKind = "gateway-outage"
)

// How long the SMS provider faults last.
const (
	providerDownFor = 30 * time.Second
	providerHangFor = 15 * time.Second
)

// Fault is one planned event, At after the load starts.
type Fault struct {
	At      time.Duration
	Kind    FaultKind
	Slot    string        // Kill, ScaleDown, ScaleUp
	Down    time.Duration // Kill: how long the process stays dead before its restart; provider faults: how long they last
	Queues  int           // Reshard: the new number of queues
	Mode    string        // GatewayOutage: "fail" or "timeout"
	Planned int           // position in the plan, for messages
}

func (f Fault) String() string { return fmt.Sprintf("+%5.1fs %s", f.At.Seconds(), f.What()) }

// What says what the fault does, without when.
func (f Fault) What() string {
	switch f.Kind {
	case Kill:
		return fmt.Sprintf("kill -9 %s (restart after %.1fs)", f.Slot, f.Down.Seconds())
	case Reshard:
		return fmt.Sprintf("reshard topic to %d queues", f.Queues)
	case ScaleDown:
		return fmt.Sprintf("scale notifiers 2 → 1 (stop %s)", f.Slot)
	case ScaleUp:
		return fmt.Sprintf("scale notifiers 1 → 2 (start %s)", f.Slot)
	case ProviderDown:
		return fmt.Sprintf("SMS provider down (503) for %.0fs", f.Down.Seconds())
	case ProviderHang:
		return fmt.Sprintf("SMS provider hangs for %.0fs", f.Down.Seconds())
	case GatewayOutage:
		return fmt.Sprintf("payment gateway outage for %.0fs (calls %s)", f.Down.Seconds(), map[string]string{"fail": "fail", "timeout": "time out"}[f.Mode])
	}
	return string(f.Kind)
}

// PlanOptions shape a plan.
type PlanOptions struct {
	Duration   time.Duration // of the load
	KillsEach  int           // SIGKILLs per service process
	FromQueues int           // the topic's queues at the start
	ToQueues   int           // after the reshard
	// GatewayOutage is how long the payment gateway is out, once (0: never).
	GatewayOutage time.Duration
}

// Plan draws the run's faults from seed: the same seed gives the same plan. Every fault
// happens while the load runs; the infrastructure and provider faults (broker, Postgres,
// reshard, provider down, provider hanging) start apart from each other so the log can tell
// which one held the pipeline up; notifier-2 is not killed while it is scaled away.
func Plan(seed int64, o PlanOptions) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x77616c6c6574)) //nolint:gosec // G115: a seed's bits, reinterpreted, not a quantity
	d := o.Duration.Seconds()
	at := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r.Float64()*(hi-lo)) * d * float64(time.Second)).Round(100 * time.Millisecond)
	}
	apart := func(a, b time.Duration, gap time.Duration) bool { return (a - b).Abs() >= gap }
	// The five infrastructure and provider faults, each starting at least a tenth of the
	// run (≥ 15 s) from the others; the provider is down early enough to be up again well
	// before the load ends.
	gap := max(o.Duration/10, 15*time.Second)
	var broker, pg, reshard, provDown, provHang time.Duration
	for range 10000 {
		broker, pg, reshard = at(0.2, 0.8), at(0.2, 0.8), at(0.3, 0.7)
		provDown, provHang = at(0.1, 0.6), at(0.1, 0.85)
		all := []time.Duration{broker, pg, reshard, provDown, provHang}
		ok := true
		for i := range all {
			for j := i + 1; j < len(all); j++ {
				ok = ok && apart(all[i], all[j], gap)
			}
		}
		if ok {
			break
		}
	}
	down := at(0.15, 0.35)
	up := down + at(0.15, 0.25)
	faults := []Fault{
		{At: broker, Kind: RestartBroker},
		{At: pg, Kind: RestartPG},
		{At: reshard, Kind: Reshard, Queues: o.ToQueues},
		{At: down, Kind: ScaleDown, Slot: notifier2},
		{At: up, Kind: ScaleUp, Slot: notifier2},
		{At: provDown, Kind: ProviderDown, Down: providerDownFor},
		{At: provHang, Kind: ProviderHang, Down: providerHangFor},
	}
	for _, slot := range slotNames {
		var kills []time.Duration
		for len(kills) < o.KillsEach {
			k := at(0.05, 0.9)
			ok := true
			for _, other := range kills {
				ok = ok && apart(k, other, 8*time.Second)
			}
			if slot == notifier2 {
				ok = ok && (k < down-5*time.Second || k > up+5*time.Second)
			}
			if ok {
				kills = append(kills, k)
			}
		}
		for _, k := range kills {
			downFor := time.Duration(200+r.IntN(2800)) * time.Millisecond
			faults = append(faults, Fault{At: k, Kind: Kill, Slot: slot, Down: downFor})
		}
	}
	if o.GatewayOutage > 0 {
		faults = append(faults, gatewayOutage(seed, o))
	}
	slices.SortStableFunc(faults, func(a, b Fault) int { return int(a.At - b.At) })
	for i := range faults {
		faults[i].Planned = i + 1
	}
	return faults
}

// gatewayOutage draws the gateway outage from a generator of its own, so that adding it left
// the rest of each seed's plan as it was: it starts between a tenth and a half of the run
// (ending, for a 60 s outage in a 3-minute run, at least 30 s before the load stops), and
// fails or times out every call, as the seed decides.
func gatewayOutage(seed int64, o PlanOptions) Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x676174657761)) //nolint:gosec // G115: a seed's bits, reinterpreted, not a quantity
	latest := max(o.Duration/2, o.Duration-o.GatewayOutage-30*time.Second)
	lo := o.Duration / 10
	at := lo
	if latest > lo {
		at += time.Duration(r.Int64N(int64(latest - lo)))
	}
	mode := "fail"
	if r.IntN(2) == 0 {
		mode = "timeout"
	}
	return Fault{At: at.Round(100 * time.Millisecond), Kind: GatewayOutage, Down: o.GatewayOutage, Mode: mode}
}

// describePlan renders a plan, one fault per line.
func describePlan(faults []Fault) string {
	var b strings.Builder
	for _, f := range faults {
		fmt.Fprintf(&b, "  %2d. %s\n", f.Planned, f)
	}
	return b.String()
}
