package main

import (
	"context"
	"fmt"
)

// restartPGFault (restart-pg) restarts Postgres, the primary (after a failover, the other
// node), in the fault's Mode ("fast", or "immediate": stopped as after a crash), cutting
// every session, and the notifier's own cluster right after when it has one. The audit
// checks that every commit Postgres acknowledged survived, and that the services found
// their way back.
var restartPGFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		port, err := r.primaryPort(ctx)
		if err != nil {
			e.err = err
			return
		}
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", port))
		e.err = r.svc.run(ctx, "restart-pg", f.Mode)
		e.down, e.up = watch()
		// The notifier's own cluster, when it has one, goes through the same right after.
		if e.err == nil && r.nsvc != nil {
			e.err = r.nsvc.run(ctx, "restart-pg", f.Mode)
		}
	},
}
