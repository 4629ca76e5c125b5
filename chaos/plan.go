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
	// FreezeBroker stops a broker with SIGSTOP for Down and resumes it with SIGCONT: it
	// hangs with its ports open, and the name server keeps it in the route.
	FreezeBroker FaultKind = "freeze-broker"
	// FreezeNotifier slows the SMS provider down for a few seconds, so that a notifier has
	// sends in flight, then stops that notifier with SIGSTOP for Down, longer than its lane
	// lease, so a replica claims its users, and resumes it with SIGCONT.
	FreezeNotifier FaultKind = "freeze-notifier"
	// ProviderGarble makes the SMS provider answer some SMS, for Down, with a 500 or a 400
	// whose body is kilobytes of multi-byte text cut inside a character, with a NUL in it.
	ProviderGarble FaultKind = "provider-garble"
	// PGLock holds row locks on hot rows (wallets, the notifier's progress, the outbox) in a
	// session of the run's own for Down, longer than the services' statement timeout.
	PGLock FaultKind = "pg-lock"
	// Failover stops the wallet's Postgres primary as after a crash and promotes its
	// synchronous standby, then rebuilds a standby from the new primary.
	Failover FaultKind = "failover"

	// On a cluster (-brokers 2 or more):
	CrashBroker FaultKind = "crash-broker" // SIGKILL a broker, start it again after Down
	KillBroker  FaultKind = "kill-broker"  // SIGKILL a broker; it stays down until the load ends
	JoinBroker  FaultKind = "join-broker"  // start a new broker and give the topic Queues on it

	// Upgrade rolls the stack from the previous release, which the run started on, to this
	// one, for about Down (fault_upgrade.go).
	Upgrade FaultKind = "upgrade"
)

// How long the provider, freeze and lock faults last.
const (
	providerDownFor   = 30 * time.Second
	providerHangFor   = 15 * time.Second
	providerGarbleFor = 20 * time.Second
	brokerFreezeFor   = 30 * time.Second
	// notifierFreezeFor is twice the lane lease the run gives the notifiers (laneLease).
	notifierFreezeFor = 2 * laneLease
	// pgLockFor is three times the statement timeout the run gives the services
	// (pgStatementTimeout).
	pgLockFor = 3 * pgStatementTimeout
	// failoverFor is how long a failover occupies the run: the primary stopped and the
	// standby promoted (seconds), the services on the new primary, and a standby rebuilt.
	failoverFor = 30 * time.Second
)

// Fault is one planned event, At after the load starts.
type Fault struct {
	At      time.Duration
	Kind    FaultKind
	Slot    string        // Kill, ScaleDown, ScaleUp, FreezeNotifier
	Down    time.Duration // Kill: how long the process stays dead before its restart; provider, freeze and lock faults: how long they last
	Queues  int           // Reshard: the new number of queues (per broker); JoinBroker: the new broker's
	Mode    string        // GatewayOutage: "fail" or "timeout"; RestartPG: "fast" or "immediate"
	Broker  string        // CrashBroker, KillBroker, JoinBroker, FreezeBroker
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
	case FreezeBroker:
		return fmt.Sprintf("kill -STOP %s for %.0fs, then -CONT", f.Broker, f.Down.Seconds())
	case FreezeNotifier:
		return fmt.Sprintf("slow SMS provider, kill -STOP %s for %.0fs, then -CONT", f.Slot, f.Down.Seconds())
	case ProviderGarble:
		return fmt.Sprintf("SMS provider garbles errors for %.0fs", f.Down.Seconds())
	case PGLock:
		return fmt.Sprintf("Postgres row locks held for %.0fs", f.Down.Seconds())
	case Failover:
		return "fail Postgres over to its synchronous standby"
	case Upgrade:
		return fmt.Sprintf("rolling upgrade from the previous release (~%.0fs)", f.Down.Seconds())
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
	// single broker's restart and the SMS provider's outages.
	Brokers int
	// Upgrade plans the upgrade from the previous release (see placeUpgrade).
	Upgrade bool
}

// span is a stretch of the run, from At to End.
type span struct{ At, End time.Duration }

func (s span) overlaps(o span) bool { return s.At < o.End && o.At < s.End }

// footprint is the stretch of the run a fault occupies: from its start to the end of what it
// does, and the settling after it, for the faults that others must keep away from.
func footprint(f Fault) span {
	switch f.Kind {
	case FreezeBroker:
		// Its measure is everyone else's latency while one broker hangs: no other fault
		// may start in it, nor just before it (a restarted process is still catching up).
		return span{f.At - 12*time.Second, f.At + f.Down + 5*time.Second}
	case FreezeNotifier:
		// The replicas must be up and able to send while it is frozen (after the provider
		// slowed down before it), and until it has resumed and found its claims taken.
		return span{f.At - 12*time.Second, f.At + slowAtMost + f.Down + 5*time.Second}
	case RestartBroker:
		// Stopping a broker under load and starting it again takes 20–60 s on a busy
		// machine.
		return span{f.At, f.At + 60*time.Second}
	case RestartPG:
		return span{f.At, f.At + 10*time.Second}
	case Failover:
		return span{f.At, f.At + failoverFor}
	case ProviderDown, ProviderHang, ProviderGarble, PGLock:
		return span{f.At, f.At + f.Down + 3*time.Second}
	case Kill:
		return span{f.At, f.At + f.Down}
	}
	return span{f.At, f.At + 5*time.Second}
}

// clash reports whether two faults may not overlap (their footprints, see footprint): a
// frozen broker overlaps nothing but the payment gateway's outage (which holds deposits up
// before their commit, never between a commit and its SMS, the latency a freeze measures
// for its neighbours); the SMS
// provider has one mode at a time; a notifier is not frozen while the provider is out (the
// replica that takes its users must be able to send) or the only broker restarts (it would
// hold no users: nothing arrives); a held lock does not span a Postgres restart (which
// would end it), nor an SMS provider outage (which would hide what the lock delays); a
// failover overlaps no restart of Postgres, held lock or frozen notifier (whose replica must
// write to take its users).
func clash(a, b Fault) bool {
	if !footprint(a).overlaps(footprint(b)) {
		return false
	}
	provider := func(k FaultKind) bool { return k == ProviderDown || k == ProviderHang || k == ProviderGarble }
	either := func(k FaultKind) bool { return a.Kind == k || b.Kind == k }
	both := func(x, y FaultKind) bool { return (a.Kind == x && b.Kind == y) || (a.Kind == y && b.Kind == x) }
	switch {
	case either(FreezeBroker) && !either(GatewayOutage):
		return true
	case provider(a.Kind) && provider(b.Kind):
		return true
	case both(FreezeNotifier, ProviderDown), both(FreezeNotifier, ProviderHang), both(FreezeNotifier, RestartBroker):
		return true
	case both(PGLock, RestartPG), both(PGLock, ProviderDown), both(PGLock, ProviderHang):
		return true
	case both(Failover, RestartPG), both(Failover, PGLock), both(Failover, FreezeNotifier):
		return true
	}
	return false
}

// Plan draws the run's faults from seed: the same seed gives the same plan. Every fault
// happens while the load runs; the infrastructure and provider faults start apart from each
// other so the log can tell which one held the pipeline up, and never overlap where one would
// void another (see clash); no process is killed while a broker is frozen or Postgres fails
// over, no notifier while one is frozen, and the notifiers are not scaled down then;
// notifier-2 is not killed while it is scaled away.
func Plan(seed int64, o PlanOptions) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), 0x77616c6c6574)) //nolint:gosec // G115: a seed's bits, reinterpreted, not a quantity
	d := o.Duration.Seconds()
	at := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r.Float64()*(hi-lo)) * d * float64(time.Second)).Round(100 * time.Millisecond)
	}
	apart := func(a, b time.Duration, gap time.Duration) bool { return (a - b).Abs() >= gap }
	// The notifiers are scaled down and up again outside the freezes: on one broker the
	// freezes are placed around the scaling, on a cluster the scaling around the broker's
	// freeze (early in the run; the notifier's is late).
	var down, up time.Duration
	scale := func() span {
		down = at(0.15, 0.35)
		up = down + at(0.15, 0.25)
		return span{down - 5*time.Second, up + 5*time.Second}
	}
	var faults []Fault
	if o.Brokers >= 2 {
		faults = clusterFaults(r, o, at)
		for range 10000 {
			away, ok := scale(), true
			for _, f := range faults {
				if f.Kind == FreezeBroker || f.Kind == FreezeNotifier {
					ok = ok && !away.overlaps(footprint(f))
				}
			}
			if ok {
				break
			}
		}
	} else {
		faults = singleBrokerFaults(r, o, at, apart, scale())
	}
	// Kills keep out of the freezes: all of them out of a broker's, the notifiers' out of a
	// notifier's; and out of a failover, which shows that every process finds the new
	// primary by itself.
	var quiet, quietNotifiers []span
	for _, f := range faults {
		switch f.Kind {
		case FreezeBroker, Failover:
			quiet = append(quiet, footprint(f))
		case FreezeNotifier:
			quietNotifiers = append(quietNotifiers, footprint(f))
		}
	}
	inside := func(f Fault, spans []span) bool {
		for _, s := range spans {
			if footprint(f).overlaps(s) {
				return true
			}
		}
		return false
	}
	faults = append(faults,
		Fault{At: down, Kind: ScaleDown, Slot: notifier2},
		Fault{At: up, Kind: ScaleUp, Slot: notifier2},
	)
	for _, slot := range SlotNames(o.Replicas) {
		var kills []Fault
		for tries := 0; len(kills) < o.KillsEach; tries++ {
			k := Fault{At: at(0.05, 0.9), Kind: Kill, Slot: slot, Down: time.Duration(200+r.IntN(2800)) * time.Millisecond}
			// (A run too short to keep them apart, while developing, has them anyway.)
			ok := tries > 100000 || !inside(k, quiet)
			for _, other := range kills {
				ok = ok && apart(k.At, other.At, 8*time.Second)
			}
			if strings.HasPrefix(slot, "notifier") {
				ok = ok && (tries > 100000 || !inside(k, quietNotifiers))
			}
			if slot == notifier2 {
				ok = ok && (k.At < down-5*time.Second || k.At > up+5*time.Second)
			}
			if ok {
				kills = append(kills, k)
			}
		}
		faults = append(faults, kills...)
	}
	if o.GatewayOutage > 0 {
		faults = append(faults, gatewayOutage(seed, o))
	}
	if o.Upgrade {
		faults = append(faults, placeUpgrade(seed, o, faults))
	}
	slices.SortStableFunc(faults, func(a, b Fault) int { return int(a.At - b.At) })
	for i := range faults {
		faults[i].Planned = i + 1
	}
	return faults
}

// notifierToFreeze draws which notifier a run freezes.
func notifierToFreeze(r *rand.Rand, replicas int) string {
	return fmt.Sprintf("notifier-%d", 1+r.IntN(max(replicas, 2)))
}

// singleBrokerFaults draws the infrastructure and provider faults of a one-broker run: the
// broker restarted and frozen, Postgres restarted, failed over and a lock held in it, the
// reshard, the SMS provider down, hanging and answering garbled errors, a notifier frozen.
// The five of them that the run had first (restarts, reshard, provider down and hanging)
// start at least a tenth of the run (≥ 15 s) from each other; none overlaps another it would
// void (clash); the provider is down early enough to be up again well before the load ends;
// the freezes keep out of the time the notifiers are scaled down (scaledDown).
func singleBrokerFaults(r *rand.Rand, o PlanOptions, at func(lo, hi float64) time.Duration, apart func(a, b, gap time.Duration) bool, scaledDown span) []Fault {
	gap := max(o.Duration/10, 15*time.Second)
	frozen := notifierToFreeze(r, o.Replicas)
	// Drawn one after the other, the most constrained first, each until it fits those drawn
	// before it; all over again if one cannot.
	draws := []struct {
		lo, hi float64
		f      Fault
		spaced bool // one of the five kept a tenth of the run apart
	}{
		{0.1, 0.75, Fault{Kind: FreezeBroker, Broker: BrokerName(0), Down: brokerFreezeFor}, false},
		{0.1, 0.8, Fault{Kind: FreezeNotifier, Slot: frozen, Down: notifierFreezeFor}, false},
		{0.2, 0.8, Fault{Kind: RestartBroker}, true},
		{0.2, 0.8, Fault{Kind: RestartPG, Mode: "fast"}, true},
		{0.2, 0.8, Fault{Kind: Failover}, false},
		{0.3, 0.7, Fault{Kind: Reshard, Queues: o.ToQueues}, true},
		{0.1, 0.6, Fault{Kind: ProviderDown, Down: providerDownFor}, true},
		{0.1, 0.85, Fault{Kind: ProviderHang, Down: providerHangFor}, true},
		{0.1, 0.8, Fault{Kind: ProviderGarble, Down: providerGarbleFor}, false},
		{0.1, 0.85, Fault{Kind: PGLock, Down: pgLockFor}, false},
	}
	var faults []Fault
	for range 300 {
		faults = faults[:0]
		for i, d := range draws {
			for range 300 {
				f := d.f
				f.At = at(d.lo, d.hi)
				ok := (f.Kind != FreezeBroker && f.Kind != FreezeNotifier) || !footprint(f).overlaps(scaledDown)
				for j, g := range faults {
					ok = ok && !clash(f, g) && (!d.spaced || !draws[j].spaced || apart(f.At, g.At, gap))
				}
				if ok {
					faults = append(faults, f)
					break
				}
			}
			if len(faults) == i {
				break
			}
		}
		if len(faults) == len(draws) {
			return faults
		}
	}
	// A run too short for them all to fit (a quick one, while developing) has them all
	// anyway, overlapping.
	for _, d := range draws[len(faults):] {
		f := d.f
		f.At = at(d.lo, d.hi)
		faults = append(faults, f)
	}
	return faults
}

// clusterFaults draws the infrastructure faults of a cluster run, one after the other so
// that each one's effect can be told apart: a broker (broker-a or broker-b) frozen for 30 s
// while nothing else happens, broker-a crashing and coming back after 5–20 s, Postgres
// stopping as after a crash, a new broker joining, Postgres failing over to its standby,
// broker-b crashing and staying down until the load ends, and, while it is down, the topic
// growing on the brokers that are up; then a lock held in Postgres, and a notifier frozen
// past its lease. The SMS provider answers garbled errors for a while somewhere in between,
// never while a broker is frozen.
func clusterFaults(r *rand.Rand, o PlanOptions, at func(lo, hi float64) time.Duration) []Fault {
	freeze := at(0.03, 0.05)
	frozenBroker := BrokerName(r.IntN(2))
	crash := at(0.20, 0.25)
	crashDown := time.Duration(5000+r.IntN(15001)) * time.Millisecond
	pg := at(0.38, 0.42)
	join := at(0.45, 0.48)
	dead := at(0.55, 0.58)
	reshard := dead + at(0.08, 0.11)
	lock := at(0.70, 0.73)
	frozenNotifier := notifierToFreeze(r, o.Replicas)
	stall := at(0.80, 0.83)
	faults := []Fault{
		{At: freeze, Kind: FreezeBroker, Broker: frozenBroker, Down: brokerFreezeFor},
		{At: crash, Kind: CrashBroker, Broker: BrokerName(0), Down: crashDown},
		{At: pg, Kind: RestartPG, Mode: "immediate"},
		{At: join, Kind: JoinBroker, Broker: BrokerName(o.Brokers), Queues: o.FromQueues},
		{At: dead, Kind: KillBroker, Broker: BrokerName(1)},
		{At: reshard, Kind: Reshard, Queues: o.ToQueues},
		{At: lock, Kind: PGLock, Down: pgLockFor},
		{At: stall, Kind: FreezeNotifier, Slot: frozenNotifier, Down: notifierFreezeFor},
	}
	garble := Fault{Kind: ProviderGarble, Down: providerGarbleFor}
	for range 10000 {
		garble.At = at(0.10, 0.75)
		ok := true
		for _, f := range faults {
			ok = ok && !clash(garble, f)
		}
		if ok {
			break
		}
	}
	// Drawn last, so that the other faults of a seed stay where they were before it.
	return append(faults, garble, Fault{At: at(0.50, 0.52), Kind: Failover})
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
