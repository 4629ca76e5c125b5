package main

import "context"

// providerGarbleFault (provider-garble) makes the SMS provider answer some SMS, for the
// fault's Down, with a 500 or a 400 whose body is kilobytes of multi-byte text cut inside a
// character, with a NUL in it (see garbler). The audit expects the SMS answered 400 to be
// dead-lettered and the others sent; its report says what became of each, and how many
// failure reasons were stored from the garbled replies.
var providerGarbleFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, _ *executed) {
		hold(ctx, f.Down, r.garble.on.Store)
	},
	report: (*chaosRun).reportGarbled,
}

// reportGarbled prints what became of the SMS the provider answered garbled errors.
func (r *chaosRun) reportGarbled(ctx context.Context, e executed) {
	if !e.took() {
		return
	}
	refused, retried := r.garble.garbledSMS()
	g, err := MeasureGarble(ctx, r.ndb, refused, retried)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	r.printf("      garbled 400 (refused for good) to %d SMS: %s; garbled 500 (%d times each) to %d SMS: %s; %d failure reasons stored from garbled replies\n",
		len(refused), formatOps(g.Refused), garbleTimes, len(retried), formatOps(g.Retried), g.StoredReasons)
}
