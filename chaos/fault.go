package main

import (
	"context"
	"net"
	"time"
)

// A faultAction is how the run carries out one kind of fault, and what it adds about it to
// the impact report at the end. Each kind has one, in a file of its own (fault_*.go), named
// after it: what it does, and what it checks beyond the audit's counts, which every fault is
// held to.
type faultAction struct {
	// brokerOp faults act on the brokers or the topic, one at a time: a reshard, a join or a
	// freeze needs the brokers that a restart or a join still waits for (20–90 s on a busy
	// machine) to be up. (A kill needs none.)
	brokerOp bool
	// inject carries the fault out, recording in e what happened.
	inject func(r *chaosRun, ctx context.Context, f Fault, e *executed)
	// report, if any, prints under the fault's line of the impact report what it did to whom.
	report func(r *chaosRun, ctx context.Context, e executed)
}

// faultActions holds the action of every kind of fault a plan has.
var faultActions = map[FaultKind]faultAction{
	Kill:           killFault,
	ScaleDown:      scaleDownFault,
	ScaleUp:        scaleUpFault,
	RestartBroker:  restartBrokerFault,
	RestartPG:      restartPGFault,
	CrashBroker:    crashBrokerFault,
	KillBroker:     killBrokerFault,
	JoinBroker:     joinBrokerFault,
	Reshard:        reshardFault,
	ProviderDown:   providerDownFault,
	ProviderHang:   providerHangFault,
	GatewayOutage:  gatewayOutageFault,
	FreezeBroker:   freezeBrokerFault,
	FreezeNotifier: freezeNotifierFault,
	ProviderGarble: providerGarbleFault,
	PGLock:         pgLockFault,
	Failover:       failoverFault,
	Upgrade:        upgradeFault,
}

// inject waits for the fault's time and carries it out.
func (r *chaosRun) inject(ctx context.Context, f Fault) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(r.start.Add(f.At))):
	}
	a := faultActions[f.Kind]
	if a.brokerOp {
		r.brokerOps.Lock()
		defer r.brokerOps.Unlock()
	}
	e := executed{Fault: f, start: time.Now()}
	if a.inject != nil {
		a.inject(r, ctx, f, &e)
	}
	e.end = time.Now()
	status := "done"
	switch {
	case e.err != nil:
		status = "FAILED: " + firstLine(e.err.Error())
	case e.skipped:
		status = "skipped (not running)"
	}
	r.printf("chaos: +%5.1fs %-40s took %5.1fs %s\n", e.start.Sub(r.start).Seconds(), f.What(), e.end.Sub(e.start).Seconds(), status)
	r.mu.Lock()
	r.executed = append(r.executed, e)
	r.mu.Unlock()
}

// reportFault adds, under a fault's line of the impact report, what its action reports.
func (r *chaosRun) reportFault(ctx context.Context, e executed) {
	if report := faultActions[e.Kind].report; report != nil {
		report(r, ctx, e)
	}
}

// took reports whether the fault was carried out: it neither failed nor found nothing to do.
func (e executed) took() bool { return e.err == nil && !e.skipped }

// hold turns a fault of the SMS provider on with set, for d (or until ctx ends), and off.
func hold(ctx context.Context, d time.Duration, set func(on bool)) {
	set(true)
	sleep(ctx, d)
	set(false)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watchOutage probes addr every 50 ms until the returned func is called, and then returns
// when the port first refused a connection and when it accepted one again after that (zero
// times if it never went down).
func watchOutage(ctx context.Context, addr string) func() (down, up time.Time) {
	stop := make(chan struct{})
	done := make(chan struct{})
	var down, up time.Time
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		dialer := &net.Dialer{Timeout: 200 * time.Millisecond}
		for {
			c, err := dialer.DialContext(ctx, "tcp", addr)
			now := time.Now()
			if err == nil {
				_ = c.Close() // a probe: it only had to connect
				if !down.IsZero() && up.IsZero() {
					up = now
				}
			} else if down.IsZero() {
				down = now
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (time.Time, time.Time) {
		close(stop)
		<-done
		return down, up
	}
}
