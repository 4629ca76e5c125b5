// Command bench is walletsaga's load generator (make bench). In one run on one machine it
// measures the ceilings — raw Postgres (a pgx transaction of the wallet step's shape, and
// pgbench) and raw RocketMQ (ordered SendSync and orderly consumption with the project's
// client) — then the product: walletsvc and notifier started as processes on a database and
// topic of their own, driven over HTTP with ?wait=true; then the notifier alone draining the
// raw run's backlog, and the notifier's delivery lanes (a slow provider, a failing user, a
// provider outage, a large backlog), and the product under abuse (scrapers and a flood beside
// its deposits). It prints a table and writes JSON and Markdown under
// bench/results/.
//
// One file per part, in the order the parts run (see parts): ceiling_postgres.go,
// ceiling_rocketmq.go, product.go (with product_phase.go and durable.go), dtm.go (with
// dtm_server.go: the peer, DTM, in the same run), notify_drain.go,
// notify_slow.go, lane_isolation.go, lane_outage.go, lane_backlog.go, abuse.go; and the concerns they
// share: config.go, env.go (databases, topics, processes), cpu.go, machine.go, wal.go,
// results.go (ratios and targets) and report.go (tables, JSON and Markdown).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/ordering"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench is one run.
type bench struct {
	cfg   config
	log   *slog.Logger
	admin *pgxpool.Pool
	ts    string
	tag   int64
	dbs   []string
	meter *cpuMeter
	res   *Results
	// stub is the payment gateway and merchant of the product part's walletsvc (no
	// latency); slowStub the same with -sim-latency, for the phases that ask for it. The
	// retention and lane runs, on databases of their own, start stubs of their own.
	stub, slowStub *providerStub
	// wal holds the WAL from the first phase that records a span until inspectWAL, after
	// the last part.
	wal       *walKeeper
	dtmDB     string   // DTM's store
	dtmWorkDB string   // the business database of DTM's equal-work phases
	dtmBuild  dtmBuild // DTM's server, built before the first part
	// stmts reads pg_stat_statements (statements.go).
	stmts *statementMeter
	// rawTopic holds the raw broker run's backlog, which the notifier drains next.
	rawTopic string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ordering.RouteClientLogs(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	started := time.Now()
	b := &bench{cfg: cfg, log: log, ts: started.UTC().Format("20060102T150405Z"), tag: started.Unix()}
	for _, d := range []string{cfg.OutDir, cfg.RunDir} {
		if err := os.MkdirAll(d, 0o755); err != nil { //nolint:gosec // G301: it may create the run dir, where the postgres user must reach the cluster
			return err
		}
	}
	if b.admin, err = pgxpool.New(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	defer b.admin.Close()
	if err := b.admin.Ping(ctx); err != nil {
		return fmt.Errorf("postgres at %s: %w (run make services)", cfg.DatabaseURL, err)
	}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	stack := getenv("WALLETSAGA_RUN_DIR") // where scripts/services.sh keeps the stack's state
	if stack == "" {
		stack = filepath.Join(cfg.Repo, ".run")
	}
	b.meter = &cpuMeter{
		postmaster: pidFromFile(filepath.Join(stack, "pg/data/postmaster.pid")),
		broker:     pidFromFile(filepath.Join(stack, "rocketmq/broker.pid")),
		procs:      map[string]process{},
	}
	b.res = &Results{Started: started, Machine: describeMachine(ctx, b.admin, cfg.Repo), Settings: settingsOf(cfg)}
	defer b.cleanup()
	if b.stub, err = startProviderStub(ctx, 0); err != nil {
		return err
	}
	defer b.stub.close()
	if b.slowStub, err = startProviderStub(ctx, cfg.SimLatency); err != nil {
		return err
	}
	defer b.slowStub.close()

	err = b.all(ctx)
	if ierr := b.inspectWAL(ctx); ierr != nil {
		err = errors.Join(err, fmt.Errorf("reading the WAL: %w", ierr))
	}
	b.res.Seconds = round2(time.Since(started).Seconds())
	b.res.Machine.LoadEnd = loadAvg()
	b.res.finish()
	printTable(stdout, b.res)
	if werr := b.write(); werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// prepare checks and builds, before any part, what the selected parts need: a run that cannot
// do one of them stops before it measured anything, and a build does not heat the machine
// between two parts.
func (b *bench) prepare(ctx context.Context) error {
	if b.cfg.Parts["product"] || b.cfg.Parts["retention"] || b.cfg.Parts["dtm"] || b.cfg.Parts["abuse"] {
		if err := checkStatementsLoaded(ctx, b.admin); err != nil {
			return err
		}
	}
	if b.cfg.Parts["dtm"] {
		var err error
		if b.dtmBuild, err = buildDTM(ctx, b.cfg.RunDir, b.log); err != nil {
			return err
		}
	}
	return nil
}

// part is one of the bench's parts, named as -parts names it.
type part struct {
	name, what string
	run        func(context.Context) error
}

// parts are the bench's parts in the order they run.
func (b *bench) parts() []part {
	return []part{
		{"pg", "postgres ceiling", b.postgresCeiling},
		{"mq", "broker ceiling", b.brokerCeiling},
		{"product", "product", b.product},
		{"retention", "retention", b.retention},
		{"dtm", "DTM", b.dtm},
		{"notify", "notifier drain", b.notifyDrain},
		{"slow", "slow provider", b.slowProvider},
		{"isolation", "isolation", b.isolation},
		{"outage", "outage", b.outage},
		{"backlog", "backlog", b.backlog},
		{"abuse", "abuse", b.abuse},
	}
}

// all runs the parts -parts selected, in order.
func (b *bench) all(ctx context.Context) error {
	for _, p := range b.parts() {
		if !b.cfg.Parts[p.name] {
			continue
		}
		if err := p.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
	}
	return nil
}

func (b *bench) step(name string) func() {
	t0 := time.Now()
	b.log.Info("bench: " + name + " …")
	return func() { b.log.Info("bench: "+name+" done", "took", time.Since(t0).Round(100*time.Millisecond)) }
}

// profile runs f under a CPU profile of this process written to <out>/<ts>-<name>.cpu.pprof.
func (b *bench) profile(name string, f func() error) error {
	if !b.cfg.Profile {
		return f()
	}
	path := filepath.Join(b.cfg.OutDir, b.ts+"-"+name+".cpu.pprof")
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		return errors.Join(err, out.Close())
	}
	err = f()
	pprof.StopCPUProfile()
	b.res.Profiles = append(b.res.Profiles, path)
	// The profile is written by the time StopCPUProfile returns; a failed close may have lost
	// the end of it.
	return errors.Join(err, out.Close())
}

// cleanup stops every process the run started and drops its databases (unless -keep-dbs).
func (b *bench) cleanup() {
	b.releaseWAL()
	b.stmts.close()
	for _, p := range b.meter.procs {
		stopProc(p)
	}
	if b.cfg.KeepDBs {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range b.dbs {
		if err := dropDB(ctx, b.admin, d); err != nil {
			b.log.Warn("dropping a bench database", "db", d, "err", err)
		}
	}
}
