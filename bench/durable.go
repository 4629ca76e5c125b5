package main

import (
	"context"
)

// durable measures with the cluster's fsync and synchronous_commit on (the dev and test
// cluster runs with both off): the raw wallet-step transaction and deposits and purchases at
// the client count of the best default raw run. The settings are reset afterwards, whatever
// happens; they hold cluster-wide meanwhile.
func (b *bench) durable(ctx context.Context, pr *productRun) error {
	done := b.step("durable settings (fsync, synchronous_commit on)")
	defer done()
	set := func(on bool) error {
		stmts := []string{`ALTER SYSTEM RESET fsync`, `ALTER SYSTEM RESET synchronous_commit`}
		if on {
			stmts = []string{`ALTER SYSTEM SET fsync = on`, `ALTER SYSTEM SET synchronous_commit = on`}
		}
		for _, q := range append(stmts, `SELECT pg_reload_conf()`) {
			if _, err := b.admin.Exec(context.WithoutCancel(ctx), q); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(true); err != nil {
		return err
	}
	defer func() {
		if err := set(false); err != nil {
			b.log.Error("resetting fsync and synchronous_commit failed: reset them by hand", "err", err)
		}
	}()
	// New sessions read the settings: the pools are recreated by the runs below.
	clients := 8
	best := 0.0
	for _, r := range b.res.RawPG {
		if r.TPS > best {
			best, clients = r.TPS, r.Clients
		}
	}
	u, err := b.newDB(ctx, "rawdurable")
	if err != nil {
		return err
	}
	raw, err := rawPostgres(ctx, u, []int{clients}, b.cfg.CeilingPhase, b.cfg.RawAccounts)
	if err != nil {
		return err
	}
	for i := range raw {
		raw[i].Setting = "durable"
	}
	b.res.RawPG = append(b.res.RawPG, raw...)
	b.stopProc("walletsvc")
	wenv := pr.wenv
	ws, err := b.start(ctx, "walletsvc", "walletsvc", wenv)
	if err != nil {
		return err
	}
	pr.api = newAPIClient(ws.URL)
	for _, kind := range []string{"deposit", "purchase"} {
		ph := pr.phase(ctx, kind, clients, 0, b.cfg.Phase)
		ph.Setting = "durable"
		b.log.Info("phase", "setting", "durable", "kind", kind, "clients", clients, "sagas/s", ph.SagasPerS, "api_p99_ms", ph.API.P99)
		b.res.Phases = append(b.res.Phases, ph)
	}
	return nil
}
