package main

import (
	"context"
	"time"
)

// scaleDownFault (scale-down) stops a notifier gracefully (SIGTERM) and keeps it stopped:
// one notifier fewer in the consumer group, whose queues the others take over. The audit
// checks that the hand-over lost, repeated and reordered nothing.
var scaleDownFault = faultAction{
	inject: func(r *chaosRun, _ context.Context, f Fault, e *executed) {
		e.err = r.slots[f.Slot].down(30 * time.Second)
	},
}
