package main

import (
	"context"
	"fmt"
	"time"
)

// freezeBrokerFault (freeze-broker) stops a broker with SIGSTOP for the fault's Down and
// resumes it with SIGCONT: it hangs with its ports open, and the name server keeps it in the
// route. Its report gives the commit→SMS latency of the frozen broker's users and, on a
// cluster, of everyone else's, which must stay under freezeTarget, queue by queue.
var freezeBrokerFault = faultAction{
	brokerOp: true,
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.svc.run(ctx, "freeze-broker", f.Broker)
		if e.err == nil {
			e.start = time.Now()
			sleep(ctx, f.Down)
			// Resumed whatever happens: a frozen broker would outlive the run.
			e.err = r.svc.run(context.WithoutCancel(ctx), "thaw-broker", f.Broker)
		}
	},
	report: (*chaosRun).reportFrozenBroker,
}

// freezeTarget is the commit→SMS p99 that the users of the brokers that are not frozen must
// stay under while one broker hangs.
const freezeTarget = time.Second

// reportFrozenBroker prints the latency of a frozen broker's users and of everyone else's,
// and adds it to the summary.
func (r *chaosRun) reportFrozenBroker(ctx context.Context, e executed) {
	if !e.took() {
		return
	}
	fi, err := MeasureFreeze(ctx, r.ndb, e.Broker, e.start, e.end)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	r.printf("      users on %s: %s\n", e.Broker, fi.Frozen)
	line := fmt.Sprintf("freeze of %s for %.0fs: its users %s", e.Broker, e.Down.Seconds(), fi.Frozen)
	if r.cfg.Brokers > 1 {
		verdict := "met"
		if fi.Others.Events == 0 || fi.Others.P99 >= freezeTarget {
			verdict = "MISSED"
		}
		r.printf("      users on the other brokers: %s; target p99 < %s: %s\n", fi.Others, freezeTarget, verdict)
		// Where the time went, queue by queue, so a miss can be told from this output alone.
		qs, err := MeasureFreezeQueues(ctx, r.ndb, e.start, e.end)
		if err != nil {
			r.printf("      %v\n", err)
		}
		for _, q := range qs {
			r.printf("        %s\n", q)
		}
		line = fmt.Sprintf("freeze of %s for %.0fs: users on the other brokers %s; target p99 < %s: %s. Its own users: %s",
			e.Broker, e.Down.Seconds(), fi.Others, freezeTarget, verdict, fi.Frozen)
	}
	r.summary = append(r.summary, line)
}
