package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/ordering"
)

// partNames are the bench's parts, in the order they run (bench.parts has one entry for each).
var partNames = []string{"pg", "mq", "product", "retention", "dtm", "notify", "slow", "isolation", "outage", "backlog", "abuse"}

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
	CommitDelays                 []time.Duration
	CommitSiblings               int
	SlowUsers, SlowQueues        int
	SlowDelay, SlowWindow        time.Duration
	LaneUsers                    int
	LaneRate, HalfRate           float64
	Outage                       time.Duration
	BacklogSize                  int
	RetentionWindow              time.Duration
	KeepDBs, Profile             bool
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
	parts := fs.String("parts", strings.Join(partNames, ","), "parts to run, in this order whatever the order given (notify needs mq)")
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
	fs.Float64Var(&c.LaneRate, "lane-rate", 200, "deposits/s of the failing-user and outage runs when the product phases did not run (else the half load's rate)")
	fs.Float64Var(&c.HalfRate, "half-rate", 0, "deposits/s of the half-load phase (0: half the best deposit rate of the closed-loop phases); to measure one rate again, not for the Targets table")
	fs.DurationVar(&c.Outage, "outage", 30*time.Second, "how long the provider is down in the outage run (the load lasts 10 s longer)")
	fs.DurationVar(&c.RetentionWindow, "retention-window", 5*time.Second, "every retention window of the retention part's pruning-on run (the pruning-off run keeps everything)")
	fs.IntVar(&c.BacklogSize, "backlog", 100000, "messages of the backlog the notifier drains in the backlog run")
	fs.DurationVar(&c.SimLatency, "sim-latency", 20*time.Millisecond, "latency of the in-process payment gateway and merchant stub in the extra deposit and purchase phases (0: no such phases)")
	latClients := fs.String("sim-latency-clients", "32,128", "clients of the phases with a slow gateway and merchant")
	fs.BoolVar(&c.Durable, "durable", true, "also measure with fsync and synchronous_commit on (set on the cluster for those phases with ALTER SYSTEM and a reload, then reset)")
	delays := fs.String("durable-commit-delays", "0,500us", "commit_delay of each run of the durable phases (group commit; 0: off), set with them and reset after")
	fs.IntVar(&c.CommitSiblings, "commit-siblings", 5, "commit_siblings of the durable phases whose commit_delay is not 0")
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
	if c.CommitDelays, err = parseCommitDelays(*delays); err != nil {
		return c, fmt.Errorf("-durable-commit-delays: %w", err)
	}
	if c.HalfRate < 0 {
		return c, fmt.Errorf("-half-rate: %v is below 0", c.HalfRate)
	}
	if c.CommitSiblings < 0 || c.CommitSiblings > 1000 {
		return c, fmt.Errorf("-commit-siblings: %d is not in 0…1000", c.CommitSiblings)
	}
	c.Parts = map[string]bool{}
	for _, p := range strings.Split(*parts, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(partNames, p) {
			return c, fmt.Errorf("-parts: unknown part %q", p)
		}
		c.Parts[p] = true
	}
	if c.Parts["notify"] && !c.Parts["mq"] {
		return c, errors.New("-parts: notify drains the backlog of mq; add mq")
	}
	c.Repo, _ = os.Getwd()
	return c, nil
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

// parseCommitDelays reads a list of commit_delay values: whole microseconds from 0 to
// 100 ms, Postgres's range.
func parseCommitDelays(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 || d > 100*time.Millisecond || d%time.Microsecond != 0 {
			return nil, fmt.Errorf("%q is not a list of durations from 0 to 100ms in whole microseconds", s)
		}
		out = append(out, d)
	}
	return out, nil
}

func settingsOf(c config) map[string]any {
	return map[string]any{
		"clients": c.Clients, "phase_s": c.Phase.Seconds(), "ceiling_phase_s": c.CeilingPhase.Seconds(), "users": c.Users,
		"saga_workers": c.SagaWorkers, "raw_accounts": c.RawAccounts, "pgbench_scale": c.PgbenchScale, "pgbench_clients": c.PgbenchClients,
		"mq_users": c.MQUsers, "mq_senders": c.MQSenders, "mq_send_s": c.MQSend.Seconds(), "notify_window_s": c.NotifyWindow.Seconds(),
		"slow_users": c.SlowUsers, "slow_queues": c.SlowQueues, "slow_delay_ms": c.SlowDelay.Milliseconds(), "slow_window_s": c.SlowWindow.Seconds(),
		"lane_users": c.LaneUsers, "lane_rate": c.LaneRate, "half_rate": c.HalfRate, "outage_s": c.Outage.Seconds(), "backlog": c.BacklogSize,
		"sim_latency_ms": c.SimLatency.Milliseconds(), "sim_latency_clients": c.LatencyClients, "durable": c.Durable,
		"durable_commit_delays": durationsText(c.CommitDelays), "commit_siblings": c.CommitSiblings,
	}
}
