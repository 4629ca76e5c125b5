package main

import (
	"context"
	"fmt"
)

// restartBrokerFault (restart-broker) stops the only broker with SIGTERM and starts it again,
// watching its port to know how long it was gone. Its report says how long the users whose
// messages the broker held waited, and everyone else.
var restartBrokerFault = faultAction{
	brokerOp: true,
	inject: func(r *chaosRun, ctx context.Context, _ Fault, e *executed) {
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.cfg.BrokerPort))
		e.err = r.svc.run(ctx, "restart-broker")
		e.down, e.up = watch()
	},
	report: (*chaosRun).reportHeldUp,
}
