package main

import (
	"context"
	"fmt"
	"time"
)

// crashBrokerFault (crash-broker, on a cluster) kills a broker with SIGKILL and starts it
// again after the fault's Down, watching its port to know how long it was gone. Its report
// says how long the users whose messages the broker held waited, and everyone else.
var crashBrokerFault = faultAction{
	brokerOp: true,
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.brokerPort(f.Broker)))
		e.err = r.svc.run(ctx, "kill-broker", f.Broker)
		if e.err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(f.Down):
			}
			e.err = r.svc.run(ctx, "start-broker", f.Broker)
		}
		e.down, e.up = watch()
	},
	report: (*chaosRun).reportHeldUp,
}
