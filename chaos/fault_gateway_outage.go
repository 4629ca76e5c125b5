package main

import (
	"context"
	"time"

	"github.com/walletsaga/walletsaga/internal/providersim"
)

// gatewayOutageFault (gateway-outage) makes the payment gateway simulator fail (or hang, Mode
// "timeout") every call for the fault's Down, for every wallet replica. The audit checks that
// the deposits it held up ended, each once, and that the ledger matches.
var gatewayOutageFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.gatewayOutage(ctx, f)
	},
}

// gatewayOutage switches the gateway simulator's outage on for the fault's length (through
// its control endpoint, as `providersim outage` does: every walletsvc replica, and any
// restarted one, calls that one process) and returns when the outage is over.
func (r *chaosRun) gatewayOutage(ctx context.Context, f Fault) error {
	if err := providersim.RequestOutage(ctx, r.provider.URL, providersim.DevToken, providersim.TargetGateway, f.Mode, f.Down); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.Down):
		return nil
	}
}
