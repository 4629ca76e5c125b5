package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

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
	// UpgradeFrom is the git revision of the previous release, whose binaries the run starts
	// on and the upgrade fault rolls to BinDir's ("": no upgrade); FromBinDir is where they
	// were built (set once they are).
	UpgradeFrom, FromBinDir string
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
	fs.IntVar(&c.PGPort, "pg-port", 55442, "port of the run's Postgres (its standby, when the plan fails it over, at this port + 2)")
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
	fs.StringVar(&c.UpgradeFrom, "upgrade-from", "5eb0285", "git revision of the previous release: the run starts on its walletsvc and notifier (built from git into <run-dir>/release/<commit>, once) and the upgrade fault rolls them to -bin's under the load (\"\": no upgrade, the run starts on -bin's)")
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

// standbyPort is where scripts/services.sh keeps the wallet's cluster's second node.
func (c config) standbyPort() int { return c.PGPort + 2 }

// pgURL is the URL of the run's database on the Postgres at port, or, given the ports of a
// cluster's nodes, on whichever of them is the primary (target_session_attrs=read-write),
// as a deployment with a standby configures the services.
func pgURL(ports ...int) string {
	hosts := make([]string, len(ports))
	for i, p := range ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	u := fmt.Sprintf("postgres://walletsaga:walletsaga@%s/walletsaga?sslmode=disable", strings.Join(hosts, ","))
	if len(ports) > 1 {
		u += "&target_session_attrs=read-write"
	}
	return u
}
