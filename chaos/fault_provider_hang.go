package main

import "context"

// providerHangFault (provider-hang) makes the SMS provider answer nothing for the fault's
// Down: every call times out. The audit checks that no SMS was lost or sent twice for a call
// whose outcome the notifier could not know.
var providerHangFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, _ *executed) {
		hold(ctx, f.Down, r.providerOut(r.sms.SetHanging))
	},
}
