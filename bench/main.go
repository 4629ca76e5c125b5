// Command bench is walletsaga's load generator (make bench). In one run on one machine it
// measures the ceilings — raw Postgres (a pgx transaction of the wallet step's shape, and
// pgbench) and raw RocketMQ (ordered SendSync and orderly consumption with the project's
// client) — then the product: walletsvc and notifier started as processes on a database and
// topic of their own, driven over HTTP with ?wait=true; then the notifier alone draining the
// raw run's backlog, and the notifier behind a 50 ms SMS provider. It prints a table and
// writes JSON and Markdown under bench/results/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
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

type config struct {
	DatabaseURL, Namesrv, BrokerAddr string
	// RMQ is the RocketMQ user every client of the bench signs as, the binaries included:
	// the stack's admin, since the bench's topics and groups are its own.
	RMQ                          ordering.Credentials
	BinDir, OutDir, RunDir, Repo string
	Parts                        map[string]bool
	Clients                      []int
	Phase, CeilingPhase, Drain   time.Duration
	Users, SagaWorkers           int
	RawAccounts                  int
	PgbenchScale                 int
	PgbenchClients               []int
	MQUsers, MQSenders           int
	MQSend                       time.Duration
	NotifyWindow                 time.Duration
	SimLatency                   time.Duration
	LatencyClients               []int
	Durable                      bool
	SlowUsers, SlowQueues        int
	SlowDelay, SlowWindow        time.Duration
	LaneUsers                    int
	LaneRate                     float64
	Outage                       time.Duration
	BacklogSize                  int
	KeepDBs, Profile             bool
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	def := func(k, v string) string {
		if e := getenv(k); e != "" {
			return e
		}
		return v
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.DatabaseURL, "db", def("DATABASE_URL", "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable"), "admin database URL of the cluster (the bench creates its own databases)")
	fs.StringVar(&c.Namesrv, "namesrv", def("ROCKETMQ_NAMESRV", "127.0.0.1:9876"), "RocketMQ name server")
	fs.StringVar(&c.BrokerAddr, "broker", def("ROCKETMQ_BROKER_ADDR", "127.0.0.1:10911"), "RocketMQ broker (topics are created there)")
	fs.StringVar(&c.RMQ.AccessKey, "rmq-user", def("RMQ_ADMIN_USER", "walletsaga-admin"), "RocketMQ admin user the bench signs as (scripts/services.sh's RMQ_ADMIN_USER)")
	c.RMQ.SecretKey = def("RMQ_ADMIN_SECRET", "walletsaga-dev-admin-secret") // from the environment only: never on a command line
	fs.StringVar(&c.BinDir, "bin", "bin", "directory holding the walletsvc and notifier binaries (make build)")
	fs.StringVar(&c.OutDir, "out", "bench/results", "where <timestamp>.json and .md are written")
	fs.StringVar(&c.RunDir, "rundir", ".run/bench", "where the binaries' logs go")
	parts := fs.String("parts", "pg,mq,product,notify,slow,isolation,outage,backlog", "parts to run (notify needs mq)")
	clients := fs.String("clients", "8,32,128", "concurrent clients of the product phases and the raw Postgres workload")
	fs.DurationVar(&c.Phase, "phase", 15*time.Second, "length of each product phase")
	fs.DurationVar(&c.CeilingPhase, "ceiling-phase", 10*time.Second, "length of each raw Postgres run")
	fs.DurationVar(&c.Drain, "drain", 30*time.Second, "how long a phase waits for its SMS")
	fs.IntVar(&c.Users, "users", 1000, "users of the product phases (round robin)")
	fs.IntVar(&c.SagaWorkers, "saga-workers", 0, "SAGA_WORKERS of walletsvc (0: its default)")
	fs.IntVar(&c.RawAccounts, "raw-accounts", 1000, "rows of the raw Postgres workload's account table")
	fs.IntVar(&c.PgbenchScale, "pgbench-scale", 8, "pgbench -s")
	pgc := fs.String("pgbench-clients", "8,32", "pgbench -c values")
	fs.IntVar(&c.MQUsers, "mq-users", 2000, "sharding keys of the raw broker run")
	fs.IntVar(&c.MQSenders, "mq-senders", 16, "concurrent ordered senders (the relay's default parallelism)")
	fs.DurationVar(&c.MQSend, "mq-send", 8*time.Second, "how long the raw broker run sends")
	fs.DurationVar(&c.NotifyWindow, "notify-window", 12*time.Second, "how long the notifier drains the raw backlog")
	fs.IntVar(&c.SlowUsers, "slow-users", 200, "active users of the slow-provider run")
	fs.IntVar(&c.SlowQueues, "slow-queues", 8, "queues of the slow-provider topic")
	fs.DurationVar(&c.SlowDelay, "slow-delay", 50*time.Millisecond, "the slow provider's time per SMS")
	fs.DurationVar(&c.SlowWindow, "slow-window", 10*time.Second, "measured window of the slow-provider run")
	fs.IntVar(&c.LaneUsers, "lane-users", 200, "users of the failing-user and provider-outage runs")
	fs.Float64Var(&c.LaneRate, "lane-rate", 200, "deposits/s of the failing-user and outage runs when the product phases did not run (else half the best deposit rate)")
	fs.DurationVar(&c.Outage, "outage", 30*time.Second, "how long the provider is down in the outage run (the load lasts 10 s longer)")
	fs.IntVar(&c.BacklogSize, "backlog", 100000, "messages of the backlog the notifier drains in the backlog run")
	fs.DurationVar(&c.SimLatency, "sim-latency", 20*time.Millisecond, "latency of the in-process payment gateway and merchant stub in the extra deposit and purchase phases (0: no such phases)")
	latClients := fs.String("sim-latency-clients", "32,128", "clients of the phases with a slow gateway and merchant")
	fs.BoolVar(&c.Durable, "durable", true, "also measure with fsync and synchronous_commit on (set on the cluster for those phases with ALTER SYSTEM and a reload, then reset)")
	fs.BoolVar(&c.KeepDBs, "keep-dbs", false, "keep the bench databases (default: drop them at the end)")
	fs.BoolVar(&c.Profile, "cpuprofile", true, "write a CPU profile of this process for the raw parts")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.Clients, err = parseInts(*clients); err != nil {
		return c, fmt.Errorf("-clients: %w", err)
	}
	if c.PgbenchClients, err = parseInts(*pgc); err != nil {
		return c, fmt.Errorf("-pgbench-clients: %w", err)
	}
	if c.LatencyClients, err = parseInts(*latClients); err != nil {
		return c, fmt.Errorf("-sim-latency-clients: %w", err)
	}
	c.Parts = map[string]bool{}
	for _, p := range strings.Split(*parts, ",") {
		switch p = strings.TrimSpace(p); p {
		case "pg", "mq", "product", "notify", "slow", "isolation", "outage", "backlog":
			c.Parts[p] = true
		default:
			return c, fmt.Errorf("-parts: unknown part %q", p)
		}
	}
	if c.Parts["notify"] && !c.Parts["mq"] {
		return c, errors.New("-parts: notify drains the backlog of mq; add mq")
	}
	c.Repo, _ = os.Getwd()
	return c, nil
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
	// stub is the payment gateway and merchant every walletsvc of the run calls (no
	// latency); slowStub the same with -sim-latency, for the phases that ask for it.
	stub, slowStub *providerStub
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
	stack := getenv("WALLETSAGA_RUN_DIR") // where scripts/services.sh keeps the stack's state
	if stack == "" {
		stack = filepath.Join(cfg.Repo, ".run")
	}
	b.meter = &cpuMeter{
		postmaster: pidFromFile(filepath.Join(stack, "pg/data/postmaster.pid")),
		broker:     pidFromFile(filepath.Join(stack, "rocketmq/broker.pid")),
		procs:      map[string]*proc{},
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
	b.res.Seconds = round2(time.Since(started).Seconds())
	b.res.Machine.LoadEnd = loadAvg()
	b.res.finish()
	printTable(stdout, b.res)
	if werr := b.write(); werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

func (b *bench) cleanup() {
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

func (b *bench) newDB(ctx context.Context, suffix string) (string, error) {
	name := "bench_" + strings.ToLower(b.ts) + "_" + suffix
	u, err := createDB(ctx, b.admin, b.cfg.DatabaseURL, name)
	if err != nil {
		return "", err
	}
	b.dbs = append(b.dbs, name)
	return u, nil
}

func (b *bench) newTopic(ctx context.Context, suffix string, queues int) (string, error) {
	topic := "bench-" + strconv.FormatInt(b.tag, 36) + "-" + suffix
	return topic, createTopic(ctx, b.cfg.Namesrv, b.cfg.BrokerAddr, b.cfg.RMQ, topic, queues)
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

func (b *bench) all(ctx context.Context) error {
	c := b.cfg
	if c.Parts["pg"] {
		if err := b.postgresCeiling(ctx); err != nil {
			return fmt.Errorf("postgres ceiling: %w", err)
		}
	}
	var backlogTopic string
	if c.Parts["mq"] {
		var err error
		if backlogTopic, err = b.brokerCeiling(ctx); err != nil {
			return fmt.Errorf("broker ceiling: %w", err)
		}
	}
	if c.Parts["product"] {
		if err := b.product(ctx); err != nil {
			return fmt.Errorf("product: %w", err)
		}
	}
	if c.Parts["notify"] {
		if err := b.notifyDrain(ctx, backlogTopic); err != nil {
			return fmt.Errorf("notifier drain: %w", err)
		}
	}
	if c.Parts["slow"] {
		if err := b.slowProvider(ctx); err != nil {
			return fmt.Errorf("slow provider: %w", err)
		}
	}
	for _, part := range []struct {
		name string
		run  func(context.Context) error
	}{{"isolation", b.isolation}, {"outage", b.outage}, {"backlog", b.backlog}} {
		if c.Parts[part.name] {
			if err := part.run(ctx); err != nil {
				return fmt.Errorf("%s: %w", part.name, err)
			}
		}
	}
	return nil
}

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

func (b *bench) brokerCeiling(ctx context.Context) (string, error) {
	done := b.step("raw RocketMQ ceiling")
	defer done()
	topic, err := b.newTopic(ctx, "raw", 8)
	if err != nil {
		return "", err
	}
	ns := []string{b.cfg.Namesrv}
	err = b.profile("raw-rocketmq", func() error {
		cpu0 := b.meter.sample()
		r, err := produceBacklog(ctx, ns, b.cfg.RMQ, "bench-raw-producer-"+b.ts, topic, b.cfg.MQUsers, b.cfg.MQSenders, 0, b.cfg.MQSend, b.log)
		if err != nil {
			return err
		}
		r.Queues = 8
		b.res.RawMQSendCPU = b.meter.sample().since(cpu0)
		b.log.Info("raw send", "sent", r.Sent, "msg/s", r.SendRate, "p99_ms", r.SendLatency.P99)
		cpu1 := b.meter.sample()
		n, startup, busy, err := drainRaw(ctx, ns, b.cfg.RMQ, "bench-raw-consumer-"+b.ts, topic, r.Sent, 60*time.Second, b.log)
		b.res.RawMQConsumeCPU = b.meter.sample().since(cpu1)
		r.Consumed, r.StartupSecs, r.ConsumeSecs = n, round2(startup.Seconds()), round2(busy.Seconds())
		r.ConsumeRate = rate(n, busy)
		b.res.RawMQ = &r
		b.log.Info("raw consume", "consumed", n, "msg/s", r.ConsumeRate)
		return err
	})
	return topic, err
}

func (b *bench) productEnv(dbURL, topic string) (wallet, notifier map[string]string) {
	common := map[string]string{
		"WALLETSAGA_ENV": "dev", "DATABASE_URL": dbURL, "ROCKETMQ_NAMESRV": b.cfg.Namesrv, "WALLET_EVENTS_TOPIC": topic,
		"ROCKETMQ_ACCESS_KEY": b.cfg.RMQ.AccessKey, "ROCKETMQ_SECRET_KEY": b.cfg.RMQ.SecretKey,
		"LOG_LEVEL": "warn", "MIGRATE_ON_START": "true",
	}
	wallet = map[string]string{"PRODUCER_GROUP": "bench-relay-" + b.ts, "SERVICE_TOKEN": serviceToken,
		"PAYMENT_GATEWAY_URL": b.stub.URL, "MERCHANT_URL": b.stub.URL}
	if b.cfg.SagaWorkers > 0 {
		wallet["SAGA_WORKERS"] = strconv.Itoa(b.cfg.SagaWorkers)
	}
	notifier = map[string]string{
		"CONSUMER_GROUP": "bench-notifier-" + b.ts + "-" + topic, "SMS_SENDER": "log",
		"SMS_FAIL_PHONE_PATTERN": "off", "SMS_FAIL_AMOUNT": "0", "READ_TOKEN": readToken,
	}
	for k, v := range common {
		wallet[k], notifier[k] = v, v
	}
	return wallet, notifier
}

func (b *bench) start(ctx context.Context, name, bin string, env map[string]string) (*proc, error) {
	p, err := startProc(ctx, name, filepath.Join(b.cfg.BinDir, bin), filepath.Join(b.cfg.RunDir, b.ts+"-"+name+".log"), env)
	if err != nil {
		return nil, err
	}
	b.meter.procs[name] = p
	return p, nil
}

func (b *bench) stopProc(name string) {
	if p := b.meter.procs[name]; p != nil {
		stopProc(p)
		delete(b.meter.procs, name)
	}
}

func (b *bench) product(ctx context.Context) error {
	done := b.step("product")
	defer done()
	u, err := b.newDB(ctx, "product")
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
	db, err := pgxpool.New(ctx, u)
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
	pr := &productRun{tag: "bench-" + b.ts, wenv: wenv, api: api, db: db, users: users, meter: b.meter, drain: b.cfg.Drain}
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
	if best > 0 {
		// Half load is measured on a quiet stack: the notifier may still be working off the
		// SMS backlog of the saturated phases.
		if left := pr.quiet(ctx, 3*time.Minute); left > 0 {
			b.res.Notes = append(b.res.Notes, fmt.Sprintf("half load: started with %d SMS of earlier phases still undelivered after 3 minutes", left))
		}
		ph := pr.phase(ctx, "deposit", 0, best/2, b.cfg.Phase)
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

func (b *bench) notifyDrain(ctx context.Context, topic string) error {
	done := b.step("notifier drain of the raw backlog")
	defer done()
	u, err := b.newDB(ctx, "drain")
	if err != nil {
		return err
	}
	_, nenv := b.productEnv(u, topic)
	db, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	p, err := b.start(ctx, "notifier-drain", "notifier", nenv)
	if err != nil {
		return err
	}
	cpu0 := b.meter.sample()
	var c0 int64
	_ = db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c0)
	r, err := measureDrain(ctx, db, t0, b.res.RawMQ.Sent, b.cfg.NotifyWindow)
	r.CPU = b.meter.sample().since(cpu0)
	var c1 int64
	_ = db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&c1)
	r.DBCommits = c1 - c0
	r.PeakRSSMiB = peakRSSMiB(p)
	b.stopProc("notifier-drain")
	b.res.NotifyDrain = &r
	b.log.Info("notifier drain", "sms", r.SMS, "sms/s", r.SMSPerS)
	return err
}

func (b *bench) slowProvider(ctx context.Context) error {
	done := b.step("slow SMS provider")
	defer done()
	c := b.cfg
	topic, err := b.newTopic(ctx, "slow", c.SlowQueues)
	if err != nil {
		return err
	}
	// The pool is set, not the default: the run asks what lanes do beyond the per-queue
	// ceiling, and a pool this size keeps the backlog it needs small.
	const workers = 64
	// Enough backlog that no user runs dry within the window: the lanes' ceiling's worth, twice.
	perUser := int((workers/c.SlowDelay.Seconds())*(c.SlowWindow.Seconds()+5)*2)/c.SlowUsers + 1
	mq, err := produceBacklog(ctx, []string{c.Namesrv}, c.RMQ, "bench-slow-producer-"+b.ts, topic, c.SlowUsers, 16, perUser, 2*time.Minute, b.log)
	if err != nil {
		return err
	}
	u, err := b.newDB(ctx, "slow")
	if err != nil {
		return err
	}
	prov := startProvider(c.SlowDelay, "")
	defer prov.Close()
	_, nenv := b.productEnv(u, topic)
	nenv["SMS_SENDER"], nenv["SMS_WEBHOOK_URL"], nenv["SMS_WORKERS"] = "webhook", prov.URL(), strconv.Itoa(workers)
	if _, err := b.start(ctx, "notifier-slow", "notifier", nenv); err != nil {
		return err
	}
	defer b.stopProc("notifier-slow")
	deadline := time.Now().Add(60 * time.Second)
	for prov.DeliveredCount() == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("the slow provider got no call within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Skip the first second (queues are locked one rebalance at a time), then measure.
	from := time.Now().Add(time.Second)
	time.Sleep(time.Until(from.Add(c.SlowWindow)) + 100*time.Millisecond)
	hits := int64(prov.DeliveredBetween(from, from.Add(c.SlowWindow)))
	r, dups := rate(hits, c.SlowWindow), int64(prov.Repeats())
	b.res.Slow = &SlowProvider{
		Users: c.SlowUsers, Queues: c.SlowQueues, Workers: workers, DelayMS: int(c.SlowDelay / time.Millisecond), Backlog: mq.Sent,
		WindowSecs: c.SlowWindow.Seconds(), Hits: hits, SMSPerS: r, OutOfOrder: int64(prov.OutOfOrder()), Duplicates: dups,
		QueueCeiling: round2(float64(c.SlowQueues) / c.SlowDelay.Seconds()),
		LaneCeiling:  round2(float64(workers) / c.SlowDelay.Seconds()),
	}
	b.log.Info("slow provider", "sms/s", r)
	return nil
}

func settingsOf(c config) map[string]any {
	return map[string]any{
		"clients": c.Clients, "phase_s": c.Phase.Seconds(), "ceiling_phase_s": c.CeilingPhase.Seconds(), "users": c.Users,
		"saga_workers": c.SagaWorkers, "raw_accounts": c.RawAccounts, "pgbench_scale": c.PgbenchScale, "pgbench_clients": c.PgbenchClients,
		"mq_users": c.MQUsers, "mq_senders": c.MQSenders, "mq_send_s": c.MQSend.Seconds(), "notify_window_s": c.NotifyWindow.Seconds(),
		"slow_users": c.SlowUsers, "slow_queues": c.SlowQueues, "slow_delay_ms": c.SlowDelay.Milliseconds(), "slow_window_s": c.SlowWindow.Seconds(),
		"lane_users": c.LaneUsers, "lane_rate": c.LaneRate, "outage_s": c.Outage.Seconds(), "backlog": c.BacklogSize,
		"sim_latency_ms": c.SimLatency.Milliseconds(), "sim_latency_clients": c.LatencyClients, "durable": c.Durable,
	}
}
