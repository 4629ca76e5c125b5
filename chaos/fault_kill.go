package main

import "context"

// killFault (kill) kills a service process with SIGKILL and starts it again after the
// fault's Down, on the same address (a slot scaled away is left alone). It checks what the
// audit checks: a walletsvc killed mid-saga leaves no saga stuck and no event unpublished, a
// notifier killed mid-send loses, repeats and reorders no SMS.
var killFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.slots[f.Slot].crash(ctx, f.Down)
	},
}
