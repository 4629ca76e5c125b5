package main

import (
	"context"
	"fmt"
	"time"
)

// killBrokerFault (kill-broker, on a cluster) kills a broker with SIGKILL and leaves it down
// until the load ends, when startKilledBrokers starts it again and sets the fault's end then.
// Its report says how long the users whose messages the broker held waited, and everyone
// else.
var killBrokerFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.err = r.svc.run(ctx, "kill-broker", f.Broker)
		e.down = time.Now() // the process is gone when kill-broker returns
	},
	report: (*chaosRun).reportHeldUp,
}

// startKilledBrokers starts again each broker a kill-broker fault left down, and makes its
// start the end of that fault.
func (r *chaosRun) startKilledBrokers(ctx context.Context) error {
	r.mu.Lock()
	var killed []int
	for i, e := range r.executed {
		if e.Kind == KillBroker && e.err == nil {
			killed = append(killed, i)
		}
	}
	r.mu.Unlock()
	for _, i := range killed {
		r.mu.Lock()
		name := r.executed[i].Broker
		r.mu.Unlock()
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.brokerPort(name)))
		t0 := time.Now()
		err := r.svc.run(ctx, "start-broker", name)
		_, up := watch()
		if err != nil {
			return fmt.Errorf("starting %s again after the load: %w", name, err)
		}
		r.printf("chaos: %s started again after the load (took %.1fs)\n", name, time.Since(t0).Seconds())
		r.mu.Lock()
		r.executed[i].end, r.executed[i].up = time.Now(), up
		r.mu.Unlock()
	}
	return nil
}
