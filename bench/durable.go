package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// groupCommit is one durable setting: fsync and synchronous_commit on, and Postgres's group
// commit (commit_delay, commit_siblings) as given; a zero Delay leaves it off.
type groupCommit struct {
	Delay    time.Duration
	Siblings int
}

// name is the setting's label in the tables: "durable", or "durable, commit_delay 500µs
// (siblings 5)".
func (g groupCommit) name() string {
	if g.Delay <= 0 {
		return "durable"
	}
	return fmt.Sprintf("durable, commit_delay %dµs (siblings %d)", g.Delay.Microseconds(), g.Siblings)
}

// statements set the cluster to g (on) or back to its configuration file (off), then reload.
func (g groupCommit) statements(on bool) []string {
	params := []string{"fsync", "synchronous_commit", "commit_delay", "commit_siblings"}
	var out []string
	if on {
		out = []string{`ALTER SYSTEM SET fsync = on`, `ALTER SYSTEM SET synchronous_commit = on`,
			`ALTER SYSTEM SET commit_delay = ` + strconv.FormatInt(g.Delay.Microseconds(), 10),
			`ALTER SYSTEM SET commit_siblings = ` + strconv.Itoa(g.Siblings)}
	} else {
		for _, p := range params {
			out = append(out, `ALTER SYSTEM RESET `+p)
		}
	}
	return append(out, `SELECT pg_reload_conf()`)
}

// durable measures with the cluster's fsync and synchronous_commit on (the dev and test
// cluster runs with both off), once per -durable-commit-delays value: the raw wallet-step
// transaction and deposits and purchases at the client count of the best default raw run.
// The settings are reset afterwards, whatever happens; they hold cluster-wide meanwhile.
func (b *bench) durable(ctx context.Context, pr *productRun) error {
	done := b.step("durable settings (fsync, synchronous_commit on; commit_delay " + durationsText(b.cfg.CommitDelays) + ")")
	defer done()
	exec := func(stmts []string) error {
		for _, q := range stmts {
			if _, err := b.admin.Exec(context.WithoutCancel(ctx), q); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() {
		if err := exec(groupCommit{}.statements(false)); err != nil {
			b.log.Error("resetting fsync, synchronous_commit, commit_delay and commit_siblings failed: reset them by hand", "err", err)
		}
	}()
	clients := 8
	best := 0.0
	for _, r := range b.res.RawPG {
		if r.Setting == "" && r.TPS > best {
			best, clients = r.TPS, r.Clients
		}
	}
	for i, delay := range b.cfg.CommitDelays {
		g := groupCommit{Delay: delay, Siblings: b.cfg.CommitSiblings}
		if err := exec(g.statements(true)); err != nil {
			return err
		}
		// Every session, walletsvc's and the notifier's pools included, applies the reloaded
		// settings before its next statement; walletsvc starts again once, so that its start
		// sees (and warns about) the durable cluster as a production one would.
		u, err := b.newDB(ctx, "rawdurable"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		raw, err := rawPostgres(ctx, u, []int{clients}, b.cfg.CeilingPhase, b.cfg.RawAccounts)
		if err != nil {
			return err
		}
		for j := range raw {
			raw[j].Setting = g.name()
		}
		b.res.RawPG = append(b.res.RawPG, raw...)
		if i == 0 {
			b.stopProc("walletsvc")
			ws, err := b.start(ctx, "walletsvc", "walletsvc", pr.wenv)
			if err != nil {
				return err
			}
			pr.api = newAPIClient(ws.URL)
		}
		for _, kind := range []string{"deposit", "purchase"} {
			ph := pr.phase(ctx, kind, clients, 0, b.cfg.Phase)
			ph.Setting = g.name()
			b.log.Info("phase", "setting", ph.Setting, "kind", kind, "clients", clients, "sagas/s", ph.SagasPerS, "api_p99_ms", ph.API.P99)
			b.res.Phases = append(b.res.Phases, ph)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// durationsText lists ds as a flag would take them.
func durationsText(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}
