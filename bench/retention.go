package main

import (
	"context"
	"fmt"
	"time"
)

// retention measures what pruning costs the wallet under load: the deposit closed loop at
// each client count on a fresh stack with every pruner off, then on a fresh stack with every
// window at -retention-window (so rows are pruned while the load runs), reported side by
// side. Each run starts on a database, topic and provider stub of its own, so neither
// inherits the other's rows, bloat or keys.
func (b *bench) retention(ctx context.Context) error {
	done := b.step("retention")
	defer done()
	if err := b.keepWAL(ctx); err != nil {
		return err
	}
	stmts, err := b.statements(ctx)
	if err != nil {
		return err
	}
	w := b.cfg.RetentionWindow.String()
	for _, run := range []struct {
		name, setting string
		env           map[string]string
	}{
		{"retention-off", "pruning off", map[string]string{"RETENTION_OUTBOX": "0", "RETENTION_SAGAS": "0", "RETENTION_IDEMPOTENCY": "720h",
			"RETENTION_OPERATIONS": "0", "RETENTION_AUDIT": "0", "RETENTION_INBOX": "0", "RETENTION_SMS_LOG": "0", "RETENTION_WAKES": "0",
			"RETENTION_BAD_MESSAGES": "0"}},
		{"retention-on", "pruning on, windows " + w, map[string]string{"RETENTION_OUTBOX": w, "RETENTION_SAGAS": w, "RETENTION_IDEMPOTENCY": w,
			"RETENTION_OPERATIONS": w, "RETENTION_AUDIT": w, "RETENTION_INBOX": w, "RETENTION_SMS_LOG": w, "RETENTION_WAKES": w,
			"RETENTION_BAD_MESSAGES": w}},
	} {
		if err := b.retentionRun(ctx, run.name, run.setting, run.env, stmts); err != nil {
			return fmt.Errorf("%s: %w", run.setting, err)
		}
	}
	return nil
}

func (b *bench) retentionRun(ctx context.Context, name, setting string, retention map[string]string, stmts *statementMeter) error {
	u, err := b.newDB(ctx, name)
	if err != nil {
		return err
	}
	topic, err := b.newTopic(ctx, name, 8)
	if err != nil {
		return err
	}
	wenv, nenv := b.productEnv(u, topic)
	for k, v := range retention {
		wenv[k], nenv[k] = v, v
	}
	// A gateway and merchant of the run's own: their keys are the saga ids, which a fresh
	// database numbers from 1 again, and a stub that saw the other run's would refuse them.
	stub, err := startProviderStub(ctx, 0)
	if err != nil {
		return err
	}
	defer stub.close()
	wenv["PAYMENT_GATEWAY_URL"], wenv["MERCHANT_URL"] = stub.URL, stub.URL
	ws, err := b.start(ctx, "walletsvc", "walletsvc", wenv)
	if err != nil {
		return err
	}
	defer b.stopProc("walletsvc")
	if _, err := b.start(ctx, "notifier", "notifier", nenv); err != nil {
		return err
	}
	defer b.stopProc("notifier")
	db, err := newProbePool(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	api := newAPIClient(ws.URL)
	users, err := createUsers(ctx, api, b.cfg.Users, 16, b.tag)
	if err != nil {
		return fmt.Errorf("creating users: %w", err)
	}
	pr := &productRun{tag: "bench-" + b.ts + "-" + name, wenv: wenv, api: api, db: db, dbURL: u, stmts: stmts, users: users, meter: b.meter, drain: b.cfg.Drain}
	// Warm up (not reported), long enough that the windows have passed and the pruners
	// delete rows from the first measured phase on.
	pr.phase(ctx, "deposit", 8, 0, max(2*time.Second, 2*b.cfg.RetentionWindow))
	for _, c := range b.cfg.Clients {
		ph := pr.phase(ctx, "deposit", c, 0, b.cfg.Phase)
		ph.Setting = setting
		var kept int64
		if err := pr.probe(ctx, `SELECT count(*) FROM wallet_events`).Scan(&kept); err != nil {
			return err
		}
		if retention["RETENTION_OUTBOX"] != "0" {
			// The phase's events and SMS older than the window were pruned before the
			// phase counted them: its commit→SMS figures cover only what was left.
			ph.Note = fmt.Sprintf("pruning on: %d outbox rows kept at the end; commit→SMS covers only rows not yet pruned, compare sagas/s and API latency", kept)
		}
		b.log.Info("phase", "setting", setting, "kind", "deposit", "clients", c, "sagas/s", ph.SagasPerS, "api_p99_ms", ph.API.P99, "outbox_rows", kept)
		if ph.Note != "" {
			b.res.Notes = append(b.res.Notes, fmt.Sprintf("deposit × %d (%s): %s", c, setting, ph.Note))
		}
		b.res.Phases = append(b.res.Phases, ph)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}
