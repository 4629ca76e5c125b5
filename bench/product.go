package main

import (
	"context"
	"fmt"
	"time"
)

// product runs walletsvc and the notifier on a database and topic of their own and measures
// each kind at each client count (closed loop), then half load (open loop), then, if asked,
// with a slow gateway and merchant and with durable settings.
func (b *bench) product(ctx context.Context) error {
	done := b.step("product")
	defer done()
	u, err := b.newDB(ctx, "product")
	if err != nil {
		return err
	}
	if err := b.keepWAL(ctx); err != nil {
		return err
	}
	stmts, err := b.statements(ctx)
	if err != nil {
		return err
	}
	topic, err := b.newTopic(ctx, "product", 8)
	if err != nil {
		return err
	}
	wenv, nenv := b.productEnv(u, topic)
	ws, err := b.start(ctx, "walletsvc", "walletsvc", wenv)
	if err != nil {
		return err
	}
	ns, err := b.start(ctx, "notifier", "notifier", nenv)
	if err != nil {
		return err
	}
	db, err := newProbePool(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	api := newAPIClient(ws.URL)
	t0 := time.Now()
	users, err := createUsers(ctx, api, b.cfg.Users, 16, b.tag)
	if err != nil {
		return fmt.Errorf("creating users: %w", err)
	}
	b.log.Info("users created", "n", len(users), "took", time.Since(t0).Round(time.Millisecond))
	pr := &productRun{tag: "bench-" + b.ts, wenv: wenv, api: api, db: db, dbURL: u, stmts: stmts, users: users, meter: b.meter, drain: b.cfg.Drain}
	// Warm up (not reported): connections, statement caches, the consumer's queue locks.
	pr.phase(ctx, "deposit", 8, 0, 2*time.Second)
	for _, kind := range []string{"deposit", "purchase", "transfer"} {
		for _, c := range b.cfg.Clients {
			ph := pr.phase(ctx, kind, c, 0, b.cfg.Phase)
			b.log.Info("phase", "kind", kind, "clients", c, "sagas/s", ph.SagasPerS, "api_p99_ms", ph.API.P99,
				"e2e_p99_ms", ph.E2E.P99, "failed", ph.Failed, "errors", ph.Errors, "timeouts", ph.Timeouts)
			if ph.Note != "" {
				b.res.Notes = append(b.res.Notes, fmt.Sprintf("%s × %d: %s", kind, c, ph.Note))
			}
			b.res.Phases = append(b.res.Phases, ph)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	// Half of the maximum load: deposits, open loop at half the best deposit rate.
	best := 0.0
	for _, ph := range b.res.Phases {
		if ph.Kind == "deposit" {
			best = max(best, ph.SagasPerS)
		}
	}
	half := best / 2
	if b.cfg.HalfRate > 0 {
		half = b.cfg.HalfRate
		b.res.Notes = append(b.res.Notes, fmt.Sprintf("half load: run at %.1f/s as -half-rate asked, not at half the best deposit rate (%.1f/s): its lines in the Targets table are not the half load's", half, best/2))
	}
	if half > 0 {
		// Half load is measured on a quiet stack: the notifier may still be working off the
		// SMS backlog of the saturated phases.
		if left := pr.quiet(ctx, 3*time.Minute); left > 0 {
			b.res.Notes = append(b.res.Notes, fmt.Sprintf("half load: started with %d SMS of earlier phases still undelivered after 3 minutes", left))
		}
		ph := pr.phase(ctx, "deposit", 0, half, b.cfg.Phase)
		b.log.Info("half load", "rate", ph.OpenRate, "sagas/s", ph.SagasPerS, "e2e_p99_ms", ph.E2E.P99)
		if ph.Note != "" {
			b.res.Notes = append(b.res.Notes, "half load: "+ph.Note)
		}
		b.res.HalfLoad = &ph
	}
	b.res.PeakRSS = map[string]float64{"walletsvc": peakRSSMiB(ws), "notifier": peakRSSMiB(ns)}

	// The remote parties at a realistic latency: walletsvc again, pointed at the slow stub.
	if b.cfg.SimLatency > 0 {
		b.stopProc("walletsvc")
		wenv["PAYMENT_GATEWAY_URL"], wenv["MERCHANT_URL"] = b.slowStub.URL, b.slowStub.URL
		slow, err := b.start(ctx, "walletsvc", "walletsvc", wenv)
		if err != nil {
			return err
		}
		pr.api = newAPIClient(slow.URL)
		setting := "sim latency " + b.cfg.SimLatency.String()
		for _, kind := range []string{"deposit", "purchase"} {
			for _, c := range b.cfg.LatencyClients {
				ph := pr.phase(ctx, kind, c, 0, b.cfg.Phase)
				ph.Setting = setting
				b.log.Info("phase", "setting", setting, "kind", kind, "clients", c, "sagas/s", ph.SagasPerS, "api_p99_ms", ph.API.P99)
				b.res.Phases = append(b.res.Phases, ph)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		wenv["PAYMENT_GATEWAY_URL"], wenv["MERCHANT_URL"] = b.stub.URL, b.stub.URL
		b.stopProc("walletsvc")
		if _, err := b.start(ctx, "walletsvc", "walletsvc", wenv); err != nil {
			return err
		}
	}
	if b.cfg.Durable {
		if err := b.durable(ctx, pr); err != nil {
			return fmt.Errorf("durable settings: %w", err)
		}
	}
	b.stopProc("walletsvc")
	b.stopProc("notifier")
	return nil
}
