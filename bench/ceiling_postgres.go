package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// RawPG is the raw Postgres ceiling at one concurrency: transactions of the wallet step's
// shape (update one row, insert two rows, commit) with pgx, no product code.
type RawPG struct {
	Clients int     `json:"clients"`
	TPS     float64 `json:"tps"`
	Latency Latency `json:"latency"`
	Errors  int64   `json:"errors"`
	Setting string  `json:"setting,omitempty"` // "durable…": fsync and synchronous_commit on (groupCommit.name)
}

// PGBench is pgbench's TPC-B-like result at one client count.
type PGBench struct {
	Clients int     `json:"clients"`
	TPS     float64 `json:"tps"`
	AvgMS   float64 `json:"latency_avg_ms"`
}

// postgresCeiling runs the raw wallet-step transaction at each client count, then pgbench.
func (b *bench) postgresCeiling(ctx context.Context) error {
	done := b.step("raw Postgres ceiling")
	defer done()
	u, err := b.newDB(ctx, "raw")
	if err != nil {
		return err
	}
	err = b.profile("raw-postgres", func() error {
		cpu0, t0 := b.meter.sample(), time.Now()
		r, err := rawPostgres(ctx, u, b.cfg.Clients, b.cfg.CeilingPhase, b.cfg.RawAccounts)
		b.res.RawPGCPU = b.meter.sample().since(cpu0)
		b.res.RawPGOthers = b.res.RawPGCPU.others(time.Since(t0), b.res.Machine.CPUs)
		b.res.RawPG = r
		return err
	})
	if err != nil {
		return err
	}
	for _, r := range b.res.RawPG {
		b.log.Info("raw postgres", "clients", r.Clients, "tx/s", r.TPS, "p99_ms", r.Latency.P99)
	}
	bin := findPgbench()
	if bin == "" {
		b.res.Notes = append(b.res.Notes, "pgbench not found: its TPC-B-like line is missing")
		return nil
	}
	pu, err := b.newDB(ctx, "pgbench")
	if err != nil {
		return err
	}
	b.res.PGBench, err = runPgbench(ctx, bin, pu, b.cfg.PgbenchScale, 2, b.cfg.PgbenchClients, b.cfg.CeilingPhase, func(f string, a ...any) { b.log.Info(fmt.Sprintf(f, a...)) })
	return err
}

// The raw workload's tables mirror wallets, ledger_entries and wallet_events: the same
// keys, foreign keys and the outbox's unique (user, seq) and partial unpublished index.
const rawSchema = `
CREATE SCHEMA bench_raw;
CREATE TABLE bench_raw.accounts (
    id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
    seq bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE bench_raw.ledger (
    id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES bench_raw.accounts (id),
    op bigint NOT NULL, step text NOT NULL, amount bigint NOT NULL, balance_after bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), UNIQUE (op, step, account_id));
CREATE TABLE bench_raw.events (
    id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES bench_raw.accounts (id),
    seq bigint NOT NULL, kind text NOT NULL, amount bigint NOT NULL, balance_after bigint NOT NULL,
    phone text NOT NULL, occurred_at timestamptz NOT NULL DEFAULT now(), published_at timestamptz,
    UNIQUE (account_id, seq));
CREATE INDEX ON bench_raw.events (id) WHERE published_at IS NULL;
INSERT INTO bench_raw.accounts (id, balance) SELECT g, 1000000 FROM generate_series(1, $ACCOUNTS) g;
ANALYZE bench_raw.accounts;`

// rawPostgres runs the wallet-step transaction at each client count for d.
func rawPostgres(ctx context.Context, dbURL string, clients []int, d time.Duration, accounts int) ([]RawPG, error) {
	setup, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	sql := regexp.MustCompile(`\$ACCOUNTS`).ReplaceAllString(rawSchema, strconv.Itoa(accounts))
	_, err = setup.Exec(ctx, sql)
	_ = setup.Close(ctx) // a connection of its own for the schema: nothing depends on its close
	if err != nil {
		return nil, fmt.Errorf("raw schema: %w", err)
	}
	var op atomic.Int64
	var out []RawPG
	for _, c := range clients {
		pc, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			return nil, err
		}
		pc.MaxConns, pc.MinConns = int32(c), int32(c) //nolint:gosec // G115: a client count from -clients, far below 2^31
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, err
		}
		step := func(ctx context.Context) error {
			acct := rand.Int64N(int64(accounts)) + 1
			id := op.Add(1)
			return pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
				var bal, seq int64
				if err := tx.QueryRow(ctx, `UPDATE bench_raw.accounts SET balance = balance + $2, seq = seq + 1, updated_at = now()
					WHERE id = $1 AND balance + $2 >= 0 RETURNING balance, seq`, acct, int64(100)).Scan(&bal, &seq); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO bench_raw.ledger (account_id, op, step, amount, balance_after) VALUES ($1, $2, 'credit', $3, $4)`,
					acct, id, int64(100), bal); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `INSERT INTO bench_raw.events (account_id, seq, kind, amount, balance_after, phone) VALUES ($1, $2, 'deposit', $3, $4, '+8613800001234')`,
					acct, seq, int64(100), bal)
				return err
			})
		}
		// Warm the connections and statement caches for a second, then measure.
		r := closedLoop(ctx, c, time.Second, d, step)
		pool.Close()
		out = append(out, RawPG{Clients: c, TPS: rate(r.ok, d), Latency: r.lat.latency(), Errors: r.failed})
	}
	return out, nil
}

type loopResult struct {
	ok, failed int64
	lat        recorder
}

// closedLoop runs c workers calling f back to back: warm-up first (not counted), then d.
// A call counts when it finished within the measured window.
func closedLoop(ctx context.Context, c int, warm, d time.Duration, f func(context.Context) error) *loopResult {
	r := &loopResult{}
	start := time.Now().Add(warm)
	end := start.Add(d)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := f(ctx)
				t1 := time.Now()
				if t0.Before(start) || t1.After(end) {
					continue
				}
				if err != nil {
					atomic.AddInt64(&r.failed, 1)
					continue
				}
				atomic.AddInt64(&r.ok, 1)
				r.lat.add(t1.Sub(t0))
			}
		})
	}
	wg.Wait()
	return r
}

// findPgbench returns pgbench from PATH or the newest /usr/lib/postgresql/*/bin.
func findPgbench() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) == 0 {
		return ""
	}
	slices.SortFunc(m, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return va - vb
	})
	return m[len(m)-1]
}

var (
	tpsRe = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latRe = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
)

// runPgbench initialises scale on dbURL and runs the TPC-B-like script at each client count.
func runPgbench(ctx context.Context, bin, dbURL string, scale, threads int, clients []int, d time.Duration, logf func(string, ...any)) ([]PGBench, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	pass, _ := u.User.Password()
	args := []string{"-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username()}
	db := u.Path[1:]
	env := append(os.Environ(), "PGPASSWORD="+pass)
	run := func(extra ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, append(append(slices.Clone(args), extra...), db)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("pgbench %v: %w\n%s", extra, err, out)
		}
		return string(out), nil
	}
	t0 := time.Now()
	if _, err := run("-i", "-q", "-s", strconv.Itoa(scale)); err != nil {
		return nil, err
	}
	logf("pgbench: initialised scale %d in %s", scale, time.Since(t0).Round(100*time.Millisecond))
	var res []PGBench
	for _, c := range clients {
		out, err := run("-c", strconv.Itoa(c), "-j", strconv.Itoa(min(threads, c)), "-T", strconv.Itoa(int(d.Seconds())))
		if err != nil {
			return res, err
		}
		r := PGBench{Clients: c}
		if m := tpsRe.FindStringSubmatch(out); m != nil {
			r.TPS, _ = strconv.ParseFloat(m[1], 64)
			r.TPS = round2(r.TPS)
		}
		if m := latRe.FindStringSubmatch(out); m != nil {
			r.AvgMS, _ = strconv.ParseFloat(m[1], 64)
		}
		logf("pgbench: -c %d: %.0f tps", c, r.TPS)
		res = append(res, r)
	}
	return res, nil
}
