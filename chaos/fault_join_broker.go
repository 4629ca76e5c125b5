package main

import (
	"context"
	"strconv"
)

// joinBrokerFault (join-broker, on a cluster) starts a new broker and gives the topic the
// fault's Queues on it (keys move to them). Its report says how soon the first message on an
// added queue became an SMS.
var joinBrokerFault = faultAction{
	brokerOp: true,
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.svc.run(ctx, "start-broker", f.Broker)
		if e.err == nil {
			e.err = r.svc.run(ctx, "topic", r.cfg.Topic, strconv.Itoa(f.Queues), f.Broker)
		}
	},
	report: (*chaosRun).reportAddedQueues,
}
