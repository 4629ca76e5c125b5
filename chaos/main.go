// Command chaos (make chaos) runs the whole product under faults and checks that nothing was
// lost, repeated or reordered.
//
// It starts a Postgres and a RocketMQ name server and broker of its own (scripts/services.sh
// on other ports, under .run/chaos), the payment gateway and merchant simulator (providersim,
// which is never killed: it is the remote party), two walletsvc and two notifier processes,
// and drives a mixed load — deposits, purchases (some rejected by the merchant, some beyond
// the balance) and transfers — for a few minutes over many users. Meanwhile, on a schedule
// drawn from the seed, it kills each service process with SIGKILL several times and restarts
// it, restarts the broker and Postgres once each, scales the notifiers 2 → 1 → 2, raises the
// topic's queues from 8 to 16 (keys move to other queues), takes the payment gateway and the
// SMS provider down, makes the SMS provider hang and garble its errors, freezes the broker
// and a notifier with SIGSTOP (the notifier past its lane lease) and holds row locks in
// Postgres past the services' statement timeout. Then it waits until the pipeline is quiet
// and audits the database (internal/audit). Its last line is the verdict; it exits 1 when any
// count is not zero.
//
// With -brokers 2 the stack is a cluster (broker-a and broker-b under one name server, the
// topic's queues on both) with three replicas of each service, and the infrastructure faults
// are a cluster's: one broker frozen for 30 s, broker-a killed with SIGKILL and started again
// after 5–20 s, Postgres stopped as after a crash (immediate), broker-c joining, broker-b
// killed and left down until the load ends, and the topic growing while it is down. For the
// freeze it reports the commit→SMS latency of the frozen broker's users and of everyone
// else's; for each broker crash, how long the users whose messages the broker held waited,
// and how long everyone else did; for each added queue, how soon its first message became an
// SMS.
//
// With -notify-cluster the notifier runs on a Postgres cluster of its own (NOTIFY_DATABASE_URL),
// and the audit reads each service's tables from its own database.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// failPhonePattern names the phones whose SMS the run's provider always fails (users whose
// SMS always fail): they are dead-lettered, and only theirs may be.
const failPhonePattern = `0000$`

var failPhone = regexp.MustCompile(failPhonePattern)

// serviceToken is walletsvc's documented dev token; the run sets it explicitly.
const serviceToken = "walletsaga-dev-service-token" //nolint:gosec // G101: the documented dev token, not a secret

// Settings the run gives the services, shorter than their defaults so that the freeze and
// lock faults outlast them within a few minutes: the notifiers' lane lease (LANE_LEASE), and
// both services' Postgres statement and idle-in-transaction timeouts.
const (
	laneLease          = 10 * time.Second
	pgStatementTimeout = 5 * time.Second
	pgIdleInTxTimeout  = 5 * time.Second
)

// Before a notifier is frozen, the SMS provider takes slowProvider to deliver each SMS, for
// slowBeforeFreeze, and then until the notifier holds a user's lease, for slowAtMost in all.
const (
	slowProvider     = 300 * time.Millisecond
	slowBeforeFreeze = 3 * time.Second
	slowAtMost       = 10 * time.Second
)

type config struct {
	Seed                            int64
	Users, Workers, KillsEach       int
	Rate                            float64
	Duration, QuietTimeout          time.Duration
	Root, RunDir, BinDir            string
	PGPort, NamesrvPort, BrokerPort int
	Topic, Group                    string
	Queues, Reshard                 int
	Brokers, Replicas               int
	Keep                            bool
	// NotifyCluster runs the notifier on a Postgres cluster of its own (NOTIFY_DATABASE_URL,
	// at PGPort+1), as a deployment may: its schema and migrations are its own.
	NotifyCluster bool
	GatewayOutage time.Duration
	Retention     time.Duration
	// PruneInbox also prunes the notifier's finished inbox rows within Retention.
	PruneInbox bool
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the schedule and the load (0: drawn from the clock, and printed)")
	fs.IntVar(&c.Users, "users", 200, "users")
	fs.IntVar(&c.Workers, "workers", 8, "concurrent clients")
	fs.Float64Var(&c.Rate, "rate", 30, "operations per second, shared by the clients")
	fs.DurationVar(&c.Duration, "duration", 4*time.Minute, "how long the load and the faults last")
	fs.IntVar(&c.KillsEach, "kills", 3, "SIGKILLs per service process")
	fs.DurationVar(&c.QuietTimeout, "quiet-timeout", 6*time.Minute, "how long to wait, after the load, for the pipeline to finish")
	fs.StringVar(&c.BinDir, "bin", "bin", "directory of the walletsvc, notifier and providersim binaries (make build)")
	fs.StringVar(&c.RunDir, "run-dir", ".run/chaos", "state and logs of the run's own stack")
	fs.IntVar(&c.PGPort, "pg-port", 55442, "port of the run's Postgres")
	fs.IntVar(&c.NamesrvPort, "namesrv-port", 9886, "port of the run's RocketMQ name server")
	fs.IntVar(&c.BrokerPort, "broker-port", 10941, "port of the run's broker (it also uses port-2 and port+1)")
	fs.IntVar(&c.Queues, "queues", 8, "queues of the topic at the start")
	fs.BoolVar(&c.PruneInbox, "prune-inbox", false, "also prune the notifier's finished inbox rows within -retention: the audit judges a pruned seq by its user's position at the gate; the per-fault reports, which need those rows, are skipped")
	fs.DurationVar(&c.Retention, "retention", 10*time.Second, "retention window of finished sagas, idempotency keys and wake rows, pruned while the faults run (0: the services' defaults); "+
		"the outbox, the inbox and the SMS log keep theirs: the audit and the impact reports read them at the end")
	fs.IntVar(&c.Reshard, "reshard-to", 16, "queues of the topic after the reshard")
	fs.BoolVar(&c.Keep, "keep", false, "leave the run's stack running at the end (to look around)")
	fs.DurationVar(&c.GatewayOutage, "gateway-outage", 60*time.Second, "how long the payment gateway simulator is out, once during the load (0: no outage)")
	fs.IntVar(&c.Brokers, "brokers", 1, "brokers the stack starts with; 2 or more runs a cluster and its faults (broker-a at -broker-port, each next one 20 ports up)")
	fs.IntVar(&c.Replicas, "replicas", 0, "walletsvc and notifier processes each (0: 2 on one broker, 3 on a cluster)")
	fs.BoolVar(&c.NotifyCluster, "notify-cluster", false, "run the notifier on a Postgres cluster of its own (NOTIFY_DATABASE_URL), at -pg-port+1")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Topic, c.Group = "wallet-events", "wallet-notifier"
	var problems []string
	if c.Users < 2 {
		problems = append(problems, "-users must be at least 2")
	}
	if c.PruneInbox && c.Retention <= 0 {
		problems = append(problems, "-prune-inbox needs a -retention window")
	}
	if c.Workers < 1 || c.Rate <= 0 {
		problems = append(problems, "-workers and -rate must be positive")
	}
	if c.Duration < 30*time.Second {
		problems = append(problems, "-duration must be at least 30s (the faults need room)")
	}
	if c.GatewayOutage < 0 || c.GatewayOutage > c.Duration/2 {
		problems = append(problems, "-gateway-outage must be between 0 and half of -duration")
	}
	if c.Reshard <= c.Queues {
		problems = append(problems, "-reshard-to must be more than -queues")
	}
	if c.Brokers < 1 || c.Brokers > 8 {
		problems = append(problems, "-brokers must be between 1 and 8 (a cluster run adds one more)")
	}
	if c.Replicas == 0 {
		c.Replicas = 2
		if c.Brokers > 1 {
			c.Replicas = 3
		}
	}
	if c.Replicas < 2 || c.Replicas > 9 {
		problems = append(problems, "-replicas must be between 2 and 9")
	}
	if len(problems) > 0 {
		return c, errors.New(strings.Join(problems, "; "))
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	root, err := findRoot()
	if err != nil {
		return c, err
	}
	c.Root = root
	for _, p := range []*string{&c.RunDir, &c.BinDir} {
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(root, *p)
		}
	}
	return c, nil
}

// settle makes a deposit for one user of each queue of the topic and waits until each of
// them got its SMS, so that the faults hit a stack whose every queue is published and
// consumed, not one still forming (a broker's first registration, the consumers' first
// rebalance and locks). A stack that does not settle within settleTimeout fails the run.
func (r *chaosRun) settle(ctx context.Context, c *client, users []user) error {
	t0 := time.Now()
	n := r.cfg.Queues * r.cfg.Brokers
	chosen := map[int]int64{}
	for _, u := range users {
		if failPhone.MatchString(u.phone) {
			continue
		}
		if s := ordering.HashJava.Slot(strconv.FormatInt(u.id, 10), n); chosen[s] == 0 {
			chosen[s] = u.id
		}
	}
	ids := make([]int64, 0, len(chosen))
	for s, id := range chosen {
		ids = append(ids, id)
		path := "/v1/users/" + strconv.FormatInt(id, 10) + "/deposits"
		code, out, err := c.call(ctx, s, http.MethodPost, path, fmt.Sprintf("chaos-%d-settle-%d", r.cfg.Seed, s), map[string]any{"amount": 100}, time.Minute)
		if err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if code/100 != 2 {
			return fmt.Errorf("settling: %s: status %d: %v", path, code, out)
		}
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		var got int
		if err := r.ndb.QueryRow(ctx, `SELECT count(DISTINCT user_id) FROM notify.sms_log WHERE user_id = ANY($1)`, ids).Scan(&got); err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if got == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settling: %d of the %d queues' users got their SMS within %s", got, len(ids), settleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.printf("chaos: settled in %s: a user of each of the %d queues got an SMS; the load and the faults start\n", time.Since(t0).Round(100*time.Millisecond), len(ids))
	return nil
}

// settleTimeout bounds settle.
const settleTimeout = 3 * time.Minute

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "services.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run chaos from inside the walletsaga repository")
		}
		dir = parent
	}
}

// chaosRun is one run.
type chaosRun struct {
	cfg   config
	out   io.Writer
	log   *slog.Logger
	svc   *services
	names []string // of the slots, walletsvc-1… then notifier-1…
	slots map[string]*slot
	db    *pgxpool.Pool // the wallet's database
	// ndb is the notifier's database: db itself, or with -notify-cluster one on a Postgres
	// cluster of its own, which nsvc drives.
	ndb  *pgxpool.Pool
	nsvc *services
	sms  *smsprovider.Provider
	// garble decides which SMS the provider answers garbled errors while it is on.
	garble *garbler
	// provider is the payment gateway and merchant simulator's process.
	provider *procs.Proc
	start    time.Time // of the load

	// brokerOps is held by each fault that acts on the brokers or the topic, from start to
	// end.
	brokerOps sync.Mutex

	mu       sync.Mutex
	executed []executed
	// summary holds the lines reportImpacts ends with (the freezes' figures).
	summary []string
}

// executed is a fault as it happened.
type executed struct {
	Fault
	start, end time.Time
	err        error
	// down and up are when a restarted server's port stopped and started accepting
	// connections again (restart-broker, restart-pg, crash-broker, kill-broker).
	down, up time.Time
	// skipped: the fault found nothing to do (a notifier to freeze that was not running).
	skipped bool
	// leased are the users a frozen notifier's lanes held when it stopped, and logFrom
	// where its log stood then (freeze-notifier).
	leased  []leasedUser
	logFrom int64
	// held is what a pg-lock fault locked.
	held heldLocks
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := &chaosRun{cfg: cfg, out: stdout, log: log, names: SlotNames(cfg.Replicas), slots: map[string]*slot{}}
	res, other, err := r.do(ctx)
	if err != nil {
		fmt.Fprintf(stdout, "chaos: seed=%d FAILED: %v\n", cfg.Seed, err)
		return 1
	}
	for _, d := range res.Details {
		fmt.Fprintln(stdout, "  defect:", d)
	}
	for _, d := range other {
		fmt.Fprintln(stdout, "  defect:", d)
	}
	fmt.Fprintln(stdout, verdict(res, cfg.Seed))
	if res.Failed() || len(other) > 0 {
		return 1
	}
	return 0
}

func (r *chaosRun) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format, args...)
}

func (r *chaosRun) do(ctx context.Context) (audit.Result, []string, error) {
	cfg := r.cfg
	plan := Plan(cfg.Seed, PlanOptions{Duration: cfg.Duration, KillsEach: cfg.KillsEach, FromQueues: cfg.Queues, ToQueues: cfg.Reshard,
		GatewayOutage: cfg.GatewayOutage, Replicas: cfg.Replicas, Brokers: cfg.Brokers})
	r.printf("chaos: seed=%d users=%d duration=%s rate=%.0f/s workers=%d brokers=%d replicas=%d; plan (rerun with -seed %d for the same one):\n%s",
		cfg.Seed, cfg.Users, cfg.Duration, cfg.Rate, cfg.Workers, cfg.Brokers, cfg.Replicas, cfg.Seed, describePlan(plan))
	for _, b := range []string{"walletsvc", "notifier", "providersim"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return audit.Result{}, nil, fmt.Errorf("no %s binary in %s: run make build (make chaos does)", b, cfg.BinDir)
		}
	}

	// A fresh stack of the run's own, and fresh logs.
	r.svc = newServices(cfg, r.log)
	t0 := time.Now()
	if err := os.RemoveAll(r.svc.logDir); err != nil {
		return audit.Result{}, nil, err
	}
	if err := os.MkdirAll(r.svc.logDir, 0o755); err != nil { //nolint:gosec // G301: it may create the run dir, where the postgres user must reach the cluster
		return audit.Result{}, nil, err
	}
	if err := r.svc.run(ctx, "clean"); err != nil {
		return audit.Result{}, nil, err
	}
	if err := r.svc.run(ctx, "up"); err != nil {
		// Its ports lie in the kernel's range for outgoing connections, so one may be held
		// for a moment by some other program's connection: up again starts what did not.
		r.log.Warn("starting the stack failed; trying once more", "err", firstLine(err.Error()))
		sleep(ctx, 5*time.Second)
		if err := r.svc.run(ctx, "up"); err != nil {
			return audit.Result{}, nil, err
		}
	}
	if !cfg.Keep {
		defer func() { _ = r.svc.run(context.Background(), "down") }()
	}
	var brokers []string
	for i := range cfg.Brokers {
		brokers = append(brokers, fmt.Sprintf("%s :%d", BrokerName(i), r.brokerPort(BrokerName(i))))
	}
	dbURL := pgURL(cfg.PGPort)
	ndbURL := dbURL
	if cfg.NotifyCluster {
		r.nsvc = newNotifyPG(cfg, r.log)
		if err := os.MkdirAll(r.nsvc.logDir, 0o755); err != nil { //nolint:gosec // G301: as the run's own log dir
			return audit.Result{}, nil, err
		}
		if err := r.nsvc.run(ctx, "clean"); err != nil {
			return audit.Result{}, nil, err
		}
		if err := r.nsvc.run(ctx, "pg-up"); err != nil {
			return audit.Result{}, nil, err
		}
		if !cfg.Keep {
			defer func() { _ = r.nsvc.run(context.Background(), "down") }()
		}
		ndbURL = pgURL(cfg.PGPort + 1)
		brokers = append(brokers, fmt.Sprintf("the notifier's Postgres :%d", cfg.PGPort+1))
	}
	r.printf("chaos: Postgres :%d, name server :%d, %s up in %s (logs in %s)\n", cfg.PGPort, cfg.NamesrvPort, strings.Join(brokers, ", "), time.Since(t0).Round(100*time.Millisecond), r.svc.logDir)

	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return audit.Result{}, nil, err
	}
	defer db.Close()
	r.db, r.ndb = db, db
	if cfg.NotifyCluster {
		if r.ndb, err = pgxpool.New(ctx, ndbURL); err != nil {
			return audit.Result{}, nil, err
		}
		defer r.ndb.Close()
	}
	dbs := audit.DBs{Wallet: r.db, Notify: r.ndb}
	r.garble = newGarbler()
	// What users got is the notifier's side of the audit: it lives beside the notifier's tables.
	r.sms = startSMSProvider(r.ndb, failPhone, r.garble)
	defer r.sms.Close()
	// The payment gateway and the merchant: the simulator, a process of its own that the run
	// never kills (it is the remote party, not the product), keeping what it holds in memory.
	r.provider, err = procs.Start(ctx, procs.Spec{Name: "providersim", Bin: filepath.Join(cfg.BinDir, "providersim"),
		Env: map[string]string{"WALLETSAGA_ENV": "dev", "LOG_LEVEL": "info"}, Log: filepath.Join(r.svc.logDir, "providersim.log")})
	if err != nil {
		return audit.Result{}, nil, err
	}
	defer func() { _ = r.provider.Stop(15 * time.Second) }()
	defer r.stopSlots()
	if err := r.startSlots(ctx, dbURL, ndbURL); err != nil {
		return audit.Result{}, nil, err
	}

	c := &client{token: serviceToken, http: &http.Client{Timeout: 30 * time.Second}, log: r.log}
	for _, name := range r.names {
		if strings.HasPrefix(name, "walletsvc") {
			c.bases = append(c.bases, r.slots[name].url())
		}
	}
	users, err := createUsers(ctx, c, cfg.Users)
	if err != nil {
		return audit.Result{}, nil, err
	}
	failing := 0
	for _, u := range users {
		if failPhone.MatchString(u.phone) {
			failing++
		}
	}
	r.printf("chaos: %d users created (%d with a phone configured to fail)\n", len(users), failing)
	if err := r.settle(ctx, c, users); err != nil {
		return audit.Result{}, nil, err
	}

	// The load and the faults, together.
	r.start = time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	progress := r.reportProgress(ctx, 15*time.Second)
	var faults sync.WaitGroup
	for _, f := range plan {
		faults.Go(func() { r.inject(ctx, f) })
	}
	stats := drive(loadCtx, c, users, cfg.Seed, cfg.Workers, cfg.Rate)
	r.printf("chaos: load done after %s: %s; retried requests %d\n", time.Since(r.start).Round(100*time.Millisecond), formatOps(stats.ops), c.retries.Load())
	faults.Wait()
	if ctx.Err() != nil {
		return audit.Result{}, nil, ctx.Err()
	}
	for _, e := range stats.errs {
		r.printf("  load error: %s\n", e)
	}

	// Every broker and process back (a process that died by itself is counted, and
	// restarted), then wait for the pipeline to finish.
	if err := r.startKilledBrokers(ctx); err != nil {
		return audit.Result{}, nil, err
	}
	for _, name := range r.names {
		if s := r.slots[name]; !s.running() {
			r.log.Warn("starting a process that is down at the end of the load", "slot", name)
			if err := s.up(ctx); err != nil {
				return audit.Result{}, nil, err
			}
		}
	}
	quietStart := time.Now()
	for {
		quiet, left, err := audit.Quiet(ctx, dbs)
		if err == nil && quiet {
			break
		}
		if time.Since(quietStart) > cfg.QuietTimeout {
			r.printf("chaos: not quiet %s after the load (%s); auditing anyway\n", cfg.QuietTimeout, left)
			break
		}
		if ctx.Err() != nil {
			return audit.Result{}, nil, ctx.Err()
		}
		time.Sleep(time.Second)
	}
	progress()
	r.printf("chaos: quiet %s after the load\n", time.Since(quietStart).Round(100*time.Millisecond))

	if err := r.measureInOneDatabase(ctx); err != nil {
		return audit.Result{}, nil, err
	}
	r.reportImpacts(ctx)
	// Dead letters are expected for the phones configured to fail, and for the SMS the
	// provider refused for good while it garbled its errors.
	res, err := audit.Check(ctx, dbs, audit.Options{ExpectDeadLetter: func(user, seq int64, phone string) bool {
		return failPhone.MatchString(phone) || r.garble.refusedSMS(user, seq)
	}})
	if err != nil {
		return audit.Result{}, nil, fmt.Errorf("audit: %w", err)
	}
	unexpected := 0
	if exited, err := r.provider.Exited(); exited {
		unexpected++
		r.printf("chaos: providersim exited on its own: %v\n", err)
	}
	for _, name := range r.names {
		s := r.slots[name]
		unexpected += s.unexpected
		r.printf("chaos: %s started %d times, exited on its own %d times\n", name, s.starts, s.unexpected)
	}
	r.printf("chaos: dead-lettered %d SMS (phones configured to fail, and SMS the provider refused for good); unpublished=%d wrong_text=%d phantom_sms=%d unexpected_exits=%d load_errors=%d\n",
		res.DeadLettered, res.Unpublished, res.WrongText, res.Phantom, unexpected, len(stats.errs))
	// A process that dies by itself, or a request the API refused or never answered, is a
	// defect too, though not one of the verdict line's counts.
	var other []string
	if unexpected > 0 {
		other = append(other, fmt.Sprintf("%d service processes exited on their own (see %s)", unexpected, r.svc.logDir))
	}
	if n := stats.failed(); n > 0 {
		other = append(other, fmt.Sprintf("%d operations refused or never answered", n))
	}
	return res, other, nil
}

func formatOps(ops map[string]int) string {
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, ops[k]))
	}
	return strings.Join(parts, " ")
}

// rmqUser makes env sign as the RocketMQ user scripts/services.sh creates from the variables
// userVar and secretVar, where they are set (unset, the binaries' defaults are that user's).
func rmqUser(env map[string]string, userVar, secretVar string) {
	if u := os.Getenv(userVar); u != "" {
		env["ROCKETMQ_ACCESS_KEY"] = u
	}
	if s := os.Getenv(secretVar); s != "" {
		env["ROCKETMQ_SECRET_KEY"] = s
	}
}

func (r *chaosRun) startSlots(ctx context.Context, dbURL, ndbURL string) error {
	cfg := r.cfg
	common := map[string]string{
		"WALLETSAGA_ENV": "dev", "ROCKETMQ_NAMESRV": fmt.Sprintf("127.0.0.1:%d", cfg.NamesrvPort),
		"WALLET_EVENTS_TOPIC": cfg.Topic, "LOG_LEVEL": "info", "MIGRATE_ON_START": "true",
		"PG_STATEMENT_TIMEOUT": pgStatementTimeout.String(), "PG_IDLE_IN_TX_TIMEOUT": pgIdleInTxTimeout.String(),
	}
	// A timing-out gateway holds each call for PROVIDER_TIMEOUT: 5 s, so an outage's deposits
	// are asked again several times while it lasts.
	walletEnv := map[string]string{"DATABASE_URL": dbURL, "SERVICE_TOKEN": serviceToken, "PRODUCER_GROUP": "wallet-relay",
		"PAYMENT_GATEWAY_URL": r.provider.URL, "MERCHANT_URL": r.provider.URL, "PROVIDER_TIMEOUT": "5s"}
	notifierEnv := map[string]string{
		"NOTIFY_DATABASE_URL": ndbURL, "CONSUMER_GROUP": cfg.Group, "SMS_SENDER": "webhook", "SMS_WEBHOOK_URL": r.sms.URL(), "SMS_TIMEOUT": "2s",
		"SMS_FAIL_PHONE_PATTERN": "off", "SMS_FAIL_AMOUNT": "0",
		// The failing phones' SMS are dead-lettered after 6 quick attempts (within 3 s), so
		// the run can quiet down and audit them; a healthy SMS spends an attempt or two in a
		// provider outage before the breaker holds it back, far from that bound.
		"SMS_RETRY_BASE": "100ms", "SMS_RETRY_MAX": "1s", "SMS_MAX_ATTEMPTS": "6", "SMS_DEAD_LETTER_AFTER": "0s",
		"LANE_LEASE": laneLease.String(),
	}
	for k, v := range common {
		walletEnv[k], notifierEnv[k] = v, v
	}
	if cfg.Retention > 0 {
		walletEnv["RETENTION_SAGAS"], walletEnv["RETENTION_IDEMPOTENCY"] = cfg.Retention.String(), cfg.Retention.String()
		notifierEnv["RETENTION_WAKES"] = cfg.Retention.String()
		if cfg.PruneInbox {
			notifierEnv["RETENTION_INBOX"] = cfg.Retention.String()
		}
	}
	// The binaries sign as the product's RocketMQ users, as deployed: by default the dev
	// users services.sh creates, or the ones its variables name.
	rmqUser(walletEnv, "RMQ_WALLET_USER", "RMQ_WALLET_SECRET")
	rmqUser(notifierEnv, "RMQ_NOTIFIER_USER", "RMQ_NOTIFIER_SECRET")
	for _, name := range r.names {
		s := &slot{name: name, logPath: filepath.Join(r.svc.logDir, name+".log"), log: r.log}
		if strings.HasPrefix(name, "walletsvc") {
			s.bin, s.args, s.env = filepath.Join(cfg.BinDir, "walletsvc"), []string{"serve"}, walletEnv
		} else {
			// Each notifier keeps its name across restarts, so a restarted one takes its queues
			// back at once (see CONSUMER_INSTANCE).
			env := maps.Clone(notifierEnv)
			env["CONSUMER_INSTANCE"] = name
			s.bin, s.args, s.env = filepath.Join(cfg.BinDir, "notifier"), []string{"run"}, env
		}
		r.slots[name] = s
		// One at a time: the first applies the migrations.
		if err := s.up(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (r *chaosRun) stopSlots() {
	var wg sync.WaitGroup
	for _, s := range r.slots {
		wg.Go(func() {
			if err := s.down(30 * time.Second); err != nil {
				r.log.Warn("stopping", "slot", s.name, "err", err)
			}
		})
	}
	wg.Wait()
}

// inject waits for the fault's time and carries it out.
func (r *chaosRun) inject(ctx context.Context, f Fault) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(r.start.Add(f.At))):
	}
	switch f.Kind {
	case RestartBroker, CrashBroker, JoinBroker, Reshard, FreezeBroker:
		// One at a time: a reshard, a join or a freeze needs the brokers that a restart or
		// a join still waits for (20–90 s on a busy machine) to be up. (A kill needs none.)
		r.brokerOps.Lock()
		defer r.brokerOps.Unlock()
	}
	e := executed{Fault: f, start: time.Now()}
	switch f.Kind {
	case Kill:
		e.err = r.slots[f.Slot].crash(ctx, f.Down)
	case ScaleDown:
		e.err = r.slots[f.Slot].down(30 * time.Second)
	case ScaleUp:
		e.err = r.slots[f.Slot].up(ctx)
	case RestartBroker:
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.cfg.BrokerPort))
		e.err = r.svc.run(ctx, "restart-broker")
		e.down, e.up = watch()
	case RestartPG:
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.cfg.PGPort))
		e.err = r.svc.run(ctx, "restart-pg", f.Mode)
		e.down, e.up = watch()
		// The notifier's own cluster, when it has one, goes through the same right after.
		if e.err == nil && r.nsvc != nil {
			e.err = r.nsvc.run(ctx, "restart-pg", f.Mode)
		}
	case CrashBroker:
		watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", r.brokerPort(f.Broker)))
		e.err = r.svc.run(ctx, "kill-broker", f.Broker)
		if e.err == nil {
			select {
			case <-ctx.Done():
			case <-time.After(f.Down):
			}
			e.err = r.svc.run(ctx, "start-broker", f.Broker)
		}
		e.down, e.up = watch()
	case KillBroker:
		// Started again by startKilledBrokers when the load ends, which also sets the
		// fault's end then.
		e.err = r.svc.run(ctx, "kill-broker", f.Broker)
		e.down = time.Now() // the process is gone when kill-broker returns
	case JoinBroker:
		e.err = r.svc.run(ctx, "start-broker", f.Broker)
		if e.err == nil {
			e.err = r.svc.run(ctx, "topic", r.cfg.Topic, strconv.Itoa(f.Queues), f.Broker)
		}
	case Reshard:
		e.err = r.svc.run(ctx, "topic", r.cfg.Topic, fmt.Sprint(f.Queues))
	case ProviderDown, ProviderHang:
		set := r.sms.SetOutage
		if f.Kind == ProviderHang {
			set = r.sms.SetHanging
		}
		set(true)
		select {
		case <-ctx.Done():
		case <-time.After(f.Down):
		}
		set(false)
	case GatewayOutage:
		e.err = r.gatewayOutage(ctx, f)
	case FreezeBroker:
		e.err = r.svc.run(ctx, "freeze-broker", f.Broker)
		if e.err == nil {
			e.start = time.Now()
			sleep(ctx, f.Down)
			// Resumed whatever happens: a frozen broker would outlive the run.
			e.err = r.svc.run(context.WithoutCancel(ctx), "thaw-broker", f.Broker)
		}
	case FreezeNotifier:
		// A real SMS gateway takes a few hundred milliseconds to answer: slowed down so for
		// a few seconds before the freeze (and until the notifier holds a lease), the
		// notifier has sends in flight and users leased when it stops, whose outcomes it
		// then holds while a replica takes the users over.
		r.sms.SetDelay(slowProvider)
		sleep(ctx, slowBeforeFreeze)
		for deadline := time.Now().Add(slowAtMost - slowBeforeFreeze); time.Now().Before(deadline) && ctx.Err() == nil; {
			if leased, err := r.leasedUsers(ctx, f.Slot); err == nil && len(leased) > 0 {
				break
			}
			sleep(ctx, 50*time.Millisecond)
		}
		s := r.slots[f.Slot]
		e.logFrom = fileSize(s.logPath)
		var frozen bool
		frozen, e.err = s.freeze(ctx, f.Down, func() {
			r.sms.SetDelay(0)
			e.start = time.Now()
			var err error
			if e.leased, err = r.leasedUsers(ctx, f.Slot); err != nil {
				r.log.Warn("reading the frozen notifier's leases", "err", err)
			}
		})
		r.sms.SetDelay(0)
		e.skipped = !frozen && e.err == nil
	case ProviderGarble:
		r.garble.on.Store(true)
		sleep(ctx, f.Down)
		r.garble.on.Store(false)
	case PGLock:
		e.held, e.err = holdLocks(ctx, r.db, r.ndb, f.Down)
	}
	e.end = time.Now()
	status := "done"
	switch {
	case e.err != nil:
		status = "FAILED: " + firstLine(e.err.Error())
	case e.skipped:
		status = "skipped (not running)"
	}
	r.printf("chaos: +%5.1fs %-40s took %5.1fs %s\n", e.start.Sub(r.start).Seconds(), f.What(), e.end.Sub(e.start).Seconds(), status)
	r.mu.Lock()
	r.executed = append(r.executed, e)
	r.mu.Unlock()
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fileSize is the size of the file at path (0 if it cannot be read).
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// leasedUsers lists the users whose lane lease the notifier of slot holds now (its lanes
// name their leases after its CONSUMER_INSTANCE, the slot's name).
func (r *chaosRun) leasedUsers(ctx context.Context, slot string) ([]leasedUser, error) {
	rows, err := r.ndb.Query(ctx, `SELECT user_id, last_seq FROM notify.progress
		WHERE lane_owner LIKE '%/' || $1 AND lane_until > now() ORDER BY user_id`, slot)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[leasedUser])
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

// reportProgress prints the pipeline's counts every interval until the returned func is called.
func (r *chaosRun) reportProgress(ctx context.Context, every time.Duration) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var events, published, sms, pending int
			err := r.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM wallet_events), (SELECT count(*) FROM wallet_events WHERE published_at IS NOT NULL)`).Scan(&events, &published)
			if err == nil {
				err = r.ndb.QueryRow(ctx, `SELECT (SELECT count(*) FROM notify.sms_log), (SELECT count(*) FROM notify.notifications WHERE status = 'pending')`).Scan(&sms, &pending)
			}
			if err != nil {
				r.printf("chaos: +%5.1fs progress: database: %s\n", time.Since(r.start).Seconds(), firstLine(err.Error()))
				continue
			}
			r.printf("chaos: +%5.1fs progress: events=%d published=%d sms=%d inbox_pending=%d\n", time.Since(r.start).Seconds(), events, published, sms, pending)
		}
	})
	return func() { close(done); wg.Wait() }
}

// pgURL is the URL of the run's database on the Postgres at port.
func pgURL(port int) string {
	return fmt.Sprintf("postgres://walletsaga:walletsaga@127.0.0.1:%d/walletsaga?sslmode=disable", port)
}

// measureInOneDatabase makes the notifier's database able to answer the measurements, which
// join the wallet's events with the notifier's records: with -notify-cluster it copies the
// events' keys, commit and publication times there (into a table of the run's own that neither service
// reads), once the pipeline is quiet. Sharing one database, it has nothing to do.
func (r *chaosRun) measureInOneDatabase(ctx context.Context) error {
	if r.ndb == r.db {
		return nil
	}
	rows, err := r.db.Query(ctx, `SELECT id, user_id, seq, occurred_at, published_at FROM wallet_events ORDER BY id`)
	if err != nil {
		return fmt.Errorf("reading the events to measure: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) {
		var id, user, seq int64
		var at time.Time
		var published *time.Time
		err := row.Scan(&id, &user, &seq, &at, &published)
		return []any{id, user, seq, at, published}, err
	})
	if err != nil {
		return fmt.Errorf("reading the events to measure: %w", err)
	}
	if _, err := r.ndb.Exec(ctx, `DROP TABLE IF EXISTS public.wallet_events;
		CREATE TABLE public.wallet_events (id bigint PRIMARY KEY, user_id bigint NOT NULL, seq bigint NOT NULL, occurred_at timestamptz NOT NULL, published_at timestamptz)`); err != nil {
		return fmt.Errorf("a table to measure in: %w", err)
	}
	if _, err := r.ndb.CopyFrom(ctx, pgx.Identifier{"public", "wallet_events"}, []string{"id", "user_id", "seq", "occurred_at", "published_at"}, pgx.CopyFromRows(events)); err != nil {
		return fmt.Errorf("copying the events to measure: %w", err)
	}
	r.printf("chaos: %d events copied beside the notifier's records to measure the faults\n", len(events))
	return nil
}

// reportImpacts prints, for each fault, how long it held the pipeline up.
func (r *chaosRun) reportImpacts(ctx context.Context) {
	if r.cfg.PruneInbox {
		// The reports join each event with its inbox row, which retention has pruned: say
		// how much of the inbox went, and measure nothing that would read as a miss.
		var events, left int
		if err := r.db.QueryRow(ctx, `SELECT count(*) FROM wallet_events`).Scan(&events); err != nil {
			r.printf("chaos: counting events: %v\n", err)
		}
		if err := r.ndb.QueryRow(ctx, `SELECT count(*) FROM notify.notifications`).Scan(&left); err != nil {
			r.printf("chaos: counting inbox rows: %v\n", err)
		}
		r.printf("chaos: -prune-inbox: %d inbox rows left of %d events (the rest pruned during the run); the per-fault reports are skipped, they need those rows\n", left, events)
		return
	}
	p50, p99, err := Baseline(ctx, r.ndb)
	if err != nil {
		r.printf("chaos: baseline: %v\n", err)
		return
	}
	r.printf("chaos: commit→SMS over the whole run: p50=%s p99=%s. Per fault: the longest time without any SMS in the minute after it, and the longest commit→SMS of events committed during it and the 20 s after:\n", p50, p99)
	r.mu.Lock()
	ex := slices.Clone(r.executed)
	r.mu.Unlock()
	slices.SortFunc(ex, func(a, b executed) int { return a.start.Compare(b.start) })
	for _, e := range ex {
		im, err := MeasureImpact(ctx, r.ndb, e.start, e.end)
		if err != nil {
			r.printf("  %s: %v\n", e.Fault, err)
			continue
		}
		outage := ""
		if !e.down.IsZero() && !e.up.IsZero() {
			var first time.Time
			if err := r.ndb.QueryRow(ctx, `SELECT COALESCE(min(sent_at), 'epoch') FROM notify.sms_log WHERE sent_at >= $1`, e.up).Scan(&first); err == nil && first.After(e.up) {
				outage = fmt.Sprintf("  port closed %5.1fs, first SMS %5.2fs after it reopened", e.up.Sub(e.down).Seconds(), first.Sub(e.up).Seconds())
			}
		}
		r.printf("  +%5.1fs %-40s lasted %5.1fs  sms_gap=%6.2fs  max_commit_to_sms=%6.2fs (%d events)%s\n",
			e.start.Sub(r.start).Seconds(), e.What(), e.end.Sub(e.start).Seconds(), im.LongestGap.Seconds(), im.MaxLatency.Seconds(), im.Events, outage)
		r.reportBrokerImpact(ctx, e)
		r.reportFreezeAndLock(ctx, e)
	}
	for _, line := range r.summary {
		r.printf("chaos: %s\n", line)
	}
}

// watchOutage probes addr every 50 ms until the returned func is called, and then returns
// when the port first refused a connection and when it accepted one again after that (zero
// times if it never went down).
func watchOutage(ctx context.Context, addr string) func() (down, up time.Time) {
	stop := make(chan struct{})
	done := make(chan struct{})
	var down, up time.Time
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		dialer := &net.Dialer{Timeout: 200 * time.Millisecond}
		for {
			c, err := dialer.DialContext(ctx, "tcp", addr)
			now := time.Now()
			if err == nil {
				_ = c.Close() // a probe: it only had to connect
				if !down.IsZero() && up.IsZero() {
					up = now
				}
			} else if down.IsZero() {
				down = now
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (time.Time, time.Time) {
		close(stop)
		<-done
		return down, up
	}
}

// brokerPort is where scripts/services.sh has broker name listen: -broker-port for broker-a,
// 20 ports up for each next one.
func (r *chaosRun) brokerPort(name string) int {
	return r.cfg.BrokerPort + 20*int(name[len(name)-1]-'a')
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

// freezeTarget is the commit→SMS p99 that the users of the brokers that are not frozen must
// stay under while one broker hangs.
const freezeTarget = time.Second

// reportFreezeAndLock adds, under the line of a freeze, a garbled provider or a held lock,
// what it did to whom: for a frozen broker, the latency of its users and of everyone else's;
// for a frozen notifier, when a replica served the users it held and what its lanes did
// when they resumed (records refused by the fence, sends refused by the lease check, the
// provider's 409s for keys it had delivered); for the garbled provider, what became of the
// SMS it answered so; for a held lock, what waited behind it and what was cut off.
func (r *chaosRun) reportFreezeAndLock(ctx context.Context, e executed) {
	if e.err != nil || e.skipped {
		return
	}
	switch e.Kind {
	case FreezeBroker:
		fi, err := MeasureFreeze(ctx, r.ndb, e.Broker, e.start, e.end)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		r.printf("      users on %s: %s\n", e.Broker, fi.Frozen)
		line := fmt.Sprintf("freeze of %s for %.0fs: its users %s", e.Broker, e.Down.Seconds(), fi.Frozen)
		if r.cfg.Brokers > 1 {
			verdict := "met"
			if fi.Others.Events == 0 || fi.Others.P99 >= freezeTarget {
				verdict = "MISSED"
			}
			r.printf("      users on the other brokers: %s; target p99 < %s: %s\n", fi.Others, freezeTarget, verdict)
			// Where the time went, queue by queue, so a miss can be told from this output alone.
			qs, err := MeasureFreezeQueues(ctx, r.ndb, e.start, e.end)
			if err != nil {
				r.printf("      %v\n", err)
			}
			for _, q := range qs {
				r.printf("        %s\n", q)
			}
			line = fmt.Sprintf("freeze of %s for %.0fs: users on the other brokers %s; target p99 < %s: %s. Its own users: %s",
				e.Broker, e.Down.Seconds(), fi.Others, freezeTarget, verdict, fi.Frozen)
		}
		r.summary = append(r.summary, line)
	case FreezeNotifier:
		t, err := MeasureTakeOver(ctx, r.ndb, e.leased, e.start, e.end)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		fenced, short := r.countLanesAfterFreeze(e)
		conflicts := len(r.sms.Calls(func(c smsprovider.Call) bool {
			return c.Status == http.StatusConflict && !c.At.Before(e.start) && !c.At.After(e.end.Add(laneLease))
		}))
		r.printf("      %d users leased by %s when it stopped (lease %s): the SMS it was sending of %d of them recorded by a replica before it resumed, %.1f–%.1fs after it stopped\n",
			t.Leased, e.Slot, laneLease, t.BeforeResume, t.First.Seconds(), t.Last.Seconds())
		r.printf("      after it resumed: %d outcomes not recorded (the fence had moved), %d users given back unsent (lease too short); %d SMS answered 409 (already delivered) from its stop to %s after it resumed\n",
			fenced, short, conflicts, laneLease)
		r.summary = append(r.summary, fmt.Sprintf("freeze of %s for %.0fs: %d of its %d leased users taken over by a replica before it resumed; then %d outcomes refused by the fence, %d sends refused by the lease check",
			e.Slot, e.Down.Seconds(), t.BeforeResume, t.Leased, fenced, short))
	case ProviderGarble:
		refused, retried := r.garble.garbledSMS()
		g, err := MeasureGarble(ctx, r.ndb, refused, retried)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		r.printf("      garbled 400 (refused for good) to %d SMS: %s; garbled 500 (%d times each) to %d SMS: %s; %d failure reasons stored from garbled replies\n",
			len(refused), formatOps(g.Refused), garbleTimes, len(retried), formatOps(g.Retried), g.StoredReasons)
	case PGLock:
		r.printf("      held %s\n", e.held)
		// Statements that started waiting before the release are cut off until a
		// statement timeout after it.
		logs := map[string]string{"Postgres": filepath.Join(r.cfg.RunDir, "pg", "postgres.log")}
		if r.nsvc != nil {
			logs = map[string]string{"the wallet's Postgres": logs["Postgres"],
				"the notifier's Postgres": filepath.Join(r.cfg.RunDir, "notify-pg", "pg", "postgres.log")}
		}
		for _, name := range slices.Sorted(maps.Keys(logs)) {
			c, err := countCutOff(logs[name], e.start, e.end.Add(pgStatementTimeout+time.Second))
			if err != nil {
				r.printf("      reading the log of %s: %v\n", name, err)
			} else {
				r.printf("      %s: %s\n", name, c)
			}
		}
		li, err := MeasureLock(ctx, r.ndb, e.held, e.start, e.end)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		r.printf("      users whose progress rows were held: %s\n", li.Progress)
		r.printf("      outbox rows held: their SMS sent up to %.2fs after their commit (the relay does not wait for their marks); everyone else: %s\n",
			li.OutboxLatency.Seconds(), li.Others)
	}
}

// countLanesAfterFreeze counts, in a frozen notifier's log from where it stood when it
// stopped to its next start (if it was restarted since), the outcomes its lanes could not
// record because the fence had moved, and the users they gave back unsent because their
// lease had too little left.
func (r *chaosRun) countLanesAfterFreeze(e executed) (fenced, short int) {
	f, err := os.Open(r.slots[e.Slot].logPath)
	if err != nil {
		return 0, 0
	}
	defer f.Close() //nolint:errcheck // read only
	if _, err := f.Seek(e.logFrom, io.SeekStart); err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "==== "+e.Slot+" start"):
			return fenced, short
		case strings.Contains(line, "claimed again under a new fence") && strings.Contains(line, "outcome not recorded"):
			fenced++
		case strings.Contains(line, "too little of its lease is left"):
			short++
		}
	}
	return fenced, short
}

// reportBrokerImpact adds, under a broker fault's line, whom the broker held up and whom it
// did not; under a change that added queues, how soon those queues' messages became SMS.
func (r *chaosRun) reportBrokerImpact(ctx context.Context, e executed) {
	switch e.Kind {
	case RestartBroker, CrashBroker, KillBroker:
		name := e.Broker
		if name == "" {
			name = BrokerName(0)
		}
		back := e.up
		if back.IsZero() {
			back = e.end
		}
		died := e.down // the port closed: the broker was gone
		if died.IsZero() {
			died = e.start
		}
		bi, err := MeasureBrokerImpact(ctx, r.ndb, name, died, back)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		r.printf("      held up: %d users whose messages %s held waited up to %.2fs; everyone else: %d events, commit→SMS p99=%.2fs max=%.2fs\n",
			bi.Held, name, bi.HeldMax.Seconds(), bi.Others, bi.OthersP99.Seconds(), bi.OthersMax.Seconds())
	case JoinBroker, Reshard:
		broker, fromID := e.Broker, 0
		if e.Kind == Reshard {
			broker, fromID = "", r.cfg.Queues
		}
		ni, err := MeasureNewQueues(ctx, r.ndb, broker, fromID, e.end)
		if err != nil {
			r.printf("      %v\n", err)
			return
		}
		if ni.FirstEvent < 0 {
			// Not a latency: nothing was committed on an added queue at all (the change did
			// not add any, or no key mapped there before the load ended).
			r.printf("      added queues: NO event on an added queue after the change\n")
			return
		}
		r.printf("      added queues: first event on one %.2fs after the change, first SMS from one %.2fs after it; %d events on them in the 30 s after, commit→SMS max=%.2fs\n",
			ni.FirstEvent.Seconds(), ni.FirstText.Seconds(), ni.Events, ni.Max.Seconds())
	}
}
