package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The service processes of the run: walletsvc-1…n and notifier-1…n (one consumer group).
// notifier-2 is the one scaled away and back.
const (
	wallet1   = "walletsvc-1"
	wallet2   = "walletsvc-2"
	notifier1 = "notifier-1"
	notifier2 = "notifier-2"
)

// SlotNames names the processes of a run with replicas of each service (at least 2).
func SlotNames(replicas int) []string {
	replicas = max(replicas, 2)
	var wallets, notifiers []string
	for i := 1; i <= replicas; i++ {
		wallets = append(wallets, fmt.Sprintf("walletsvc-%d", i))
		notifiers = append(notifiers, fmt.Sprintf("notifier-%d", i))
	}
	return append(wallets, notifiers...)
}

// BrokerName is the name scripts/services.sh gives broker i (0-based): broker-a, broker-b, ….
func BrokerName(i int) string { return "broker-" + "abcdefghij"[i:i+1] }

// FaultKind is one kind of thing the run does to the stack.
type FaultKind string

const (
	Kill          FaultKind = "kill"           // SIGKILL a service process, restart it after a delay
	RestartBroker FaultKind = "restart-broker" // stop the broker (SIGTERM) and start it again
	RestartPG     FaultKind = "restart-pg"     // restart Postgres, cutting every session
	ScaleDown     FaultKind = "scale-down"     // stop notifier-2 gracefully: one notifier fewer
	ScaleUp       FaultKind = "scale-up"       // start notifier-2 again
	Reshard       FaultKind = "reshard"        // raise the topic's queues (keys move to other queues)
	ProviderDown  FaultKind = "provider-down"  // the SMS provider answers 503 to everyone for Down
	ProviderHang  FaultKind = "provider-hang"  // the SMS provider answers nothing for Down (every call times out)
	// GatewayOutage makes the payment gateway simulator fail (or hang, Mode "timeout") every
	// call for Down, for every wallet replica (the providersim process all of them call).
	GatewayOutage FaultKind = "gateway-outage"

	// On a cluster (-brokers 2 or more):
	CrashBroker FaultKind = "crash-broker" // SIGKILL a broker, start it again after Down
	KillBroker  FaultKind = "kill-broker"  // SIGKILL a broker; it stays down until the load ends
	JoinBroker  FaultKind = "join-broker"  // start a new broker and give the topic Queues on it
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
	Queues  int           // Reshard: the new number of queues (per broker); JoinBroker: the new broker's
	Mode    string        // GatewayOutage: "fail" or "timeout"; RestartPG: "fast" or "immediate"
	Broker  string        // CrashBroker, KillBroker, JoinBroker
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
		return fmt.Sprintf("scale notifiers down (stop %s)", f.Slot)
	case ScaleUp:
		return fmt.Sprintf("scale notifiers back up (start %s)", f.Slot)
	case ProviderDown:
		return fmt.Sprintf("SMS provider down (503) for %.0fs", f.Down.Seconds())
	case ProviderHang:
		return fmt.Sprintf("SMS provider hangs for %.0fs", f.Down.Seconds())
	case GatewayOutage:
		return fmt.Sprintf("payment gateway outage for %.0fs (calls %s)", f.Down.Seconds(), map[string]string{"fail": "fail", "timeout": "time out"}[f.Mode])
	case RestartPG:
		return fmt.Sprintf("restart Postgres (%s)", f.Mode)
	case CrashBroker:
		return fmt.Sprintf("kill -9 %s (start after %.1fs)", f.Broker, f.Down.Seconds())
	case KillBroker:
		return fmt.Sprintf("kill -9 %s (down until the load ends)", f.Broker)
	case JoinBroker:
		return fmt.Sprintf("%s joins (%d queues on it)", f.Broker, f.Queues)
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
	// Replicas of each service (fewer than 2: 2).
	Replicas int
	// Brokers the stack starts with; 2 or more plans the cluster faults instead of the
	// single broker's restart and the SMS provider's faults.
	Brokers int
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
	var faults []Fault
	if o.Brokers >= 2 {
		faults = clusterFaults(r, o, at)
	} else {
		faults = singleBrokerFaults(o, at, apart)
	}
	down := at(0.15, 0.35)
	up := down + at(0.15, 0.25)
	faults = append(faults,
		Fault{At: down, Kind: ScaleDown, Slot: notifier2},
		Fault{At: up, Kind: ScaleUp, Slot: notifier2},
	)
	for _, slot := range SlotNames(o.Replicas) {
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

// singleBrokerFaults draws the infrastructure and provider faults of a one-broker run.
func singleBrokerFaults(o PlanOptions, at func(lo, hi float64) time.Duration, apart func(a, b, gap time.Duration) bool) []Fault {
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
	return []Fault{
		{At: broker, Kind: RestartBroker},
		{At: pg, Kind: RestartPG, Mode: "fast"},
		{At: reshard, Kind: Reshard, Queues: o.ToQueues},
		{At: provDown, Kind: ProviderDown, Down: providerDownFor},
		{At: provHang, Kind: ProviderHang, Down: providerHangFor},
	}
}

// clusterFaults draws the infrastructure faults of a cluster run, one after the other so
// that each one's effect can be told apart: broker-a crashes and comes back after 5–20 s,
// Postgres stops as after a crash, a new broker joins, broker-b crashes and stays down until
// the load ends, and, while it is down, the topic grows on the brokers that are up.
func clusterFaults(r *rand.Rand, o PlanOptions, at func(lo, hi float64) time.Duration) []Fault {
	crash := at(0.10, 0.18)
	crashDown := time.Duration(5000+r.IntN(15001)) * time.Millisecond
	pg := at(0.30, 0.36)
	join := at(0.42, 0.48)
	dead := at(0.56, 0.62)
	reshard := dead + at(0.12, 0.18)
	return []Fault{
		{At: crash, Kind: CrashBroker, Broker: BrokerName(0), Down: crashDown},
		{At: pg, Kind: RestartPG, Mode: "immediate"},
		{At: join, Kind: JoinBroker, Broker: BrokerName(o.Brokers), Queues: o.FromQueues},
		{At: dead, Kind: KillBroker, Broker: BrokerName(1)},
		{At: reshard, Kind: Reshard, Queues: o.ToQueues},
	}
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
