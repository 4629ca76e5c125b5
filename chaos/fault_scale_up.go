package main

import "context"

// scaleUpFault (scale-up) starts the notifier scale-down stopped again: it takes queues back
// from the others. The audit checks that the hand-over lost, repeated and reordered nothing.
var scaleUpFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.slots[f.Slot].up(ctx)
	},
}
