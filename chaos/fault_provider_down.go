package main

import "context"

// providerDownFault (provider-down) makes the SMS provider answer 503 to everyone for the
// fault's Down. The audit checks that the notifier held the SMS back and sent each once the
// provider was up, none dead-lettered but the failing phones'.
var providerDownFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, _ *executed) {
		hold(ctx, f.Down, r.providerOut(r.sms.SetOutage))
	},
}
