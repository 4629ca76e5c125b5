package main

import (
	"context"
	"fmt"
)

// reshardFault (reshard) raises the topic's queues to the fault's Queues on every broker that
// is up (keys move to other queues). The audit checks that no user's SMS came out of order
// across the move; its report says how soon the first message on an added queue became an
// SMS.
var reshardFault = faultAction{
	brokerOp: true,
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.svc.run(ctx, "topic", r.cfg.Topic, fmt.Sprint(f.Queues))
	},
	report: (*chaosRun).reportAddedQueues,
}
