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
// and a notifier with SIGSTOP (the notifier past its lane lease), holds row locks in
// Postgres past the services' statement timeout, and fails Postgres over to its synchronous
// standby (which it has from the start), the services following the new primary without a
// restart. Then it waits until the pipeline is quiet and audits the database
// (internal/audit). Its last line is the verdict; it exits 1 when any count is not zero.
//
// With -brokers 2 the stack is a cluster (broker-a and broker-b under one name server, the
// topic's queues on both) with three replicas of each service, and the infrastructure faults
// are a cluster's: one broker frozen for 30 s, broker-a killed with SIGKILL and started again
// after 5–20 s, Postgres stopped as after a crash (immediate), broker-c joining, Postgres
// failing over, broker-b killed and left down until the load ends, and the topic growing
// while it is down. For the freeze it reports the commit→SMS latency of the frozen broker's
// users and of everyone else's; for each broker crash, how long the users whose messages the
// broker held waited, and how long everyone else did; for each added queue, how soon its
// first message became an SMS.
//
// With -notify-cluster the notifier runs on a Postgres cluster of its own (NOTIFY_DATABASE_URL),
// and the audit reads each service's tables from its own database; only the wallet's
// cluster fails over.
//
// The run starts on the previous release's walletsvc and notifier (-upgrade-from, built from
// git), and the upgrade fault rolls them to this release's under the load (fault_upgrade.go).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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
	// standby: the plan fails the wallet's Postgres over, so its cluster has a synchronous
	// standby from the start, and dbURL, the wallet's database's URL (the services' and the
	// run's own), names both nodes.
	standby bool
	dbURL   string
	sms     *smsprovider.Provider
	// garble decides which SMS the provider answers garbled errors while it is on.
	garble *garbler
	// provider is the payment gateway and merchant simulator's process.
	provider *procs.Proc
	start    time.Time // of the load

	// brokerOps is held by each fault that acts on the brokers or the topic, from start to
	// end.
	brokerOps sync.Mutex

	// atEnd holds what undo does when the run ends, in the order it was set up.
	atEnd []func()

	mu       sync.Mutex
	executed []executed
	// summary holds the lines reportImpacts ends with (the freezes' figures).
	summary []string
	// providerOutages counts the SMS provider's outages and hangs on (see providerOut).
	providerOutages atomic.Int32
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
	// failover is what a failover did and how the services came through it.
	failover *failoverResult
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

// do runs the stack, the load and the faults, and audits what came of them. Its phases are
// methods of their own, in the order they run; what each sets up is undone when do returns,
// in the reverse order.
func (r *chaosRun) do(ctx context.Context) (audit.Result, []string, error) {
	defer r.undo()
	plan, err := r.announce()
	if err != nil {
		return audit.Result{}, nil, err
	}
	ndbURL, err := r.startStack(ctx)
	if err != nil {
		return audit.Result{}, nil, err
	}
	dbURL := r.dbURL
	if err := r.startProduct(ctx, dbURL, ndbURL); err != nil {
		return audit.Result{}, nil, err
	}
	c, users, err := r.prepareLoad(ctx)
	if err != nil {
		return audit.Result{}, nil, err
	}
	stats, progress, err := r.loadUnderFaults(ctx, c, users, plan)
	if err != nil {
		return audit.Result{}, nil, err
	}
	quietStart, err := r.untilQuiet(ctx)
	if err != nil {
		return audit.Result{}, nil, err
	}
	progress()
	r.printf("chaos: quiet %s after the load\n", time.Since(quietStart).Round(100*time.Millisecond))
	return r.judge(ctx, stats)
}

// deferUndo makes undo call f when the run ends.
func (r *chaosRun) deferUndo(f func()) { r.atEnd = append(r.atEnd, f) }

// undo undoes what the run set up, the last first.
func (r *chaosRun) undo() {
	for _, f := range slices.Backward(r.atEnd) {
		f()
	}
}

// dbs are the databases the audit reads.
func (r *chaosRun) dbs() audit.DBs { return audit.DBs{Wallet: r.db, Notify: r.ndb} }

// announce draws the plan and prints it, and checks that the binaries are built.
func (r *chaosRun) announce() ([]Fault, error) {
	cfg := r.cfg
	plan := Plan(cfg.Seed, PlanOptions{Duration: cfg.Duration, KillsEach: cfg.KillsEach, FromQueues: cfg.Queues, ToQueues: cfg.Reshard,
		GatewayOutage: cfg.GatewayOutage, Replicas: cfg.Replicas, Brokers: cfg.Brokers, Upgrade: cfg.UpgradeFrom != ""})
	r.printf("chaos: seed=%d users=%d duration=%s rate=%.0f/s workers=%d brokers=%d replicas=%d; plan (rerun with -seed %d for the same one):\n%s",
		cfg.Seed, cfg.Users, cfg.Duration, cfg.Rate, cfg.Workers, cfg.Brokers, cfg.Replicas, cfg.Seed, describePlan(plan))
	r.standby = slices.ContainsFunc(plan, func(f Fault) bool { return f.Kind == Failover })
	for _, b := range []string{"walletsvc", "notifier", "providersim"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("no %s binary in %s: run make build (make chaos does)", b, cfg.BinDir)
		}
	}
	if cfg.UpgradeFrom != "" {
		if err := r.buildRelease(); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// startStack starts a fresh stack of the run's own, with fresh logs: Postgres (with a
// synchronous standby when the plan fails it over), the name server and the brokers, and
// with -notify-cluster the notifier's Postgres. It sets the URL of the wallet's database
// (r.dbURL) and returns the notifier's.
func (r *chaosRun) startStack(ctx context.Context) (ndbURL string, err error) {
	cfg := r.cfg
	r.svc = newServices(cfg, r.log)
	t0 := time.Now()
	if err := os.RemoveAll(r.svc.logDir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.svc.logDir, 0o755); err != nil { //nolint:gosec // G301: it may create the run dir, where the postgres user must reach the cluster
		return "", err
	}
	if err := r.svc.run(ctx, "clean"); err != nil {
		return "", err
	}
	if err := r.svc.run(ctx, "up"); err != nil {
		// Its ports lie in the kernel's range for outgoing connections, so one may be held
		// for a moment by some other program's connection: up again starts what did not.
		r.log.Warn("starting the stack failed; trying once more", "err", firstLine(err.Error()))
		sleep(ctx, 5*time.Second)
		if err := r.svc.run(ctx, "up"); err != nil {
			return "", err
		}
	}
	if !cfg.Keep {
		r.deferUndo(func() { _ = r.svc.run(context.Background(), "down") })
	}
	pg := fmt.Sprintf("Postgres :%d", cfg.PGPort)
	r.dbURL = pgURL(cfg.PGPort)
	if r.standby {
		if err := r.svc.run(ctx, "pg-standby"); err != nil {
			return "", err
		}
		pg = fmt.Sprintf("Postgres :%d with its synchronous standby :%d", cfg.PGPort, cfg.standbyPort())
		r.dbURL = pgURL(cfg.PGPort, cfg.standbyPort())
	}
	var brokers []string
	for i := range cfg.Brokers {
		brokers = append(brokers, fmt.Sprintf("%s :%d", BrokerName(i), r.brokerPort(BrokerName(i))))
	}
	ndbURL = r.dbURL
	if cfg.NotifyCluster {
		r.nsvc = newNotifyPG(cfg, r.log)
		if err := os.MkdirAll(r.nsvc.logDir, 0o755); err != nil { //nolint:gosec // G301: as the run's own log dir
			return "", err
		}
		if err := r.nsvc.run(ctx, "clean"); err != nil {
			return "", err
		}
		if err := r.nsvc.run(ctx, "pg-up"); err != nil {
			return "", err
		}
		if !cfg.Keep {
			r.deferUndo(func() { _ = r.nsvc.run(context.Background(), "down") })
		}
		ndbURL = pgURL(cfg.PGPort + 1)
		brokers = append(brokers, fmt.Sprintf("the notifier's Postgres :%d", cfg.PGPort+1))
	}
	r.printf("chaos: %s, name server :%d, %s up in %s (logs in %s)\n", pg, cfg.NamesrvPort, strings.Join(brokers, ", "), time.Since(t0).Round(100*time.Millisecond), r.svc.logDir)
	return ndbURL, nil
}

// startProduct connects to the databases, starts the SMS provider, the payment gateway and
// merchant simulator, and the service processes.
func (r *chaosRun) startProduct(ctx context.Context, dbURL, ndbURL string) error {
	cfg := r.cfg
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	r.deferUndo(db.Close)
	r.db, r.ndb = db, db
	if cfg.NotifyCluster {
		if r.ndb, err = pgxpool.New(ctx, ndbURL); err != nil {
			return err
		}
		r.deferUndo(r.ndb.Close)
	}
	r.garble = newGarbler()
	// What users got is the notifier's side of the audit: it lives beside the notifier's tables.
	r.sms = startSMSProvider(r.ndb, failPhone, r.garble)
	r.deferUndo(r.sms.Close)
	// The payment gateway and the merchant: the simulator, a process of its own that the run
	// never kills (it is the remote party, not the product), keeping what it holds in memory.
	r.provider, err = procs.Start(ctx, procs.Spec{Name: "providersim", Bin: filepath.Join(cfg.BinDir, "providersim"),
		Env: map[string]string{"WALLETSAGA_ENV": "dev", "LOG_LEVEL": "info"}, Log: filepath.Join(r.svc.logDir, "providersim.log")})
	if err != nil {
		return err
	}
	r.deferUndo(func() { _ = r.provider.Stop(15 * time.Second) })
	r.deferUndo(r.stopSlots)
	if err := r.startSlots(ctx, dbURL, ndbURL); err != nil {
		return err
	}
	return nil
}

// prepareLoad creates the users, through the wallet replicas, and settles the stack.
func (r *chaosRun) prepareLoad(ctx context.Context) (*client, []user, error) {
	cfg := r.cfg
	c := &client{token: serviceToken, http: &http.Client{Timeout: 30 * time.Second}, log: r.log}
	for _, name := range r.names {
		if strings.HasPrefix(name, "walletsvc") {
			c.bases = append(c.bases, r.slots[name].url())
		}
	}
	users, err := createUsers(ctx, c, cfg.Users)
	if err != nil {
		return nil, nil, err
	}
	failing := 0
	for _, u := range users {
		if failPhone.MatchString(u.phone) {
			failing++
		}
	}
	r.printf("chaos: %d users created (%d with a phone configured to fail)\n", len(users), failing)
	if err := r.settle(ctx, c, users); err != nil {
		return nil, nil, err
	}
	return c, users, nil
}

// loadUnderFaults drives the load for the run's duration while it injects the plan's faults,
// and returns when both are over, with the load's counts and the func that stops the
// progress reports it started.
func (r *chaosRun) loadUnderFaults(ctx context.Context, c *client, users []user, plan []Fault) (*loadStats, func(), error) {
	cfg := r.cfg
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
		return nil, nil, ctx.Err()
	}
	for _, e := range stats.errs {
		r.printf("  load error: %s\n", e)
	}
	return stats, progress, nil
}

// untilQuiet brings every broker and process back (a process that died by itself is counted,
// and restarted), then waits for the pipeline to finish, for the -quiet-timeout at most. It
// returns when it started waiting.
func (r *chaosRun) untilQuiet(ctx context.Context) (time.Time, error) {
	cfg := r.cfg
	if err := r.startKilledBrokers(ctx); err != nil {
		return time.Time{}, err
	}
	for _, name := range r.names {
		if s := r.slots[name]; !s.running() {
			r.log.Warn("starting a process that is down at the end of the load", "slot", name)
			if err := s.up(ctx); err != nil {
				return time.Time{}, err
			}
		}
	}
	quietStart := time.Now()
	for {
		quiet, left, err := audit.Quiet(ctx, r.dbs())
		if err == nil && quiet {
			break
		}
		if time.Since(quietStart) > cfg.QuietTimeout {
			r.printf("chaos: not quiet %s after the load (%s); auditing anyway\n", cfg.QuietTimeout, left)
			break
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		time.Sleep(time.Second)
	}
	return quietStart, nil
}

// judge reports the faults' impact and audits the databases; the processes that exited on
// their own and the operations the API refused or never answered are defects too.
func (r *chaosRun) judge(ctx context.Context, stats *loadStats) (audit.Result, []string, error) {
	if err := r.measureInOneDatabase(ctx); err != nil {
		return audit.Result{}, nil, err
	}
	r.reportImpacts(ctx)
	// Dead letters are expected for the phones configured to fail, and for the SMS the
	// provider refused for good while it garbled its errors.
	res, err := audit.Check(ctx, r.dbs(), audit.Options{ExpectDeadLetter: func(user, seq int64, phone string) bool {
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
	r.mu.Lock()
	other = append(other, failoverDefects(r.executed)...)
	r.mu.Unlock()
	rewound, err := r.judgeRewinds(ctx)
	if err != nil {
		return audit.Result{}, nil, fmt.Errorf("audit: %w", err)
	}
	other = append(other, rewound...)
	if n := stats.failed(); n > 0 {
		other = append(other, fmt.Sprintf("%d operations refused or never answered", n))
	}
	other = append(other, r.badMessages(ctx)...)
	return res, other, nil
}
