package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
)

// services drives scripts/services.sh for the run's own Postgres and RocketMQ, on ports of
// their own and under a run directory of their own, so a chaos run never disturbs the dev
// stack that `make test` uses.
type services struct {
	root   string // the repository
	env    []string
	logDir string
	log    *slog.Logger
}

func newServices(cfg config, log *slog.Logger) *services {
	return &services{
		root: cfg.Root,
		env: append(os.Environ(),
			"WALLETSAGA_RUN_DIR="+cfg.RunDir,
			"PG_PORT="+strconv.Itoa(cfg.PGPort),
			"PG_STANDBY_PORT="+strconv.Itoa(cfg.standbyPort()),
			"NAMESRV_PORT="+strconv.Itoa(cfg.NamesrvPort),
			"BROKER_PORT="+strconv.Itoa(cfg.BrokerPort),
			"BROKERS="+strconv.Itoa(cfg.Brokers),
			// Postgres is stopped as after a crash (pg_ctl -m immediate): a commit it
			// acknowledged must survive that, as in production, or an inbox row the notifier
			// acknowledged to the broker is lost with it.
			"PG_SYNCHRONOUS_COMMIT=on",
			"RMQ_LIB="+filepath.Join(devRunDir(cfg.Root), "rocketmq", "lib"),
			fmt.Sprintf("TOPICS=%s:%d %%RETRY%%%s:1 %%DLQ%%%s:1", cfg.Topic, cfg.Queues, cfg.Group, cfg.Group),
			// The brokers' access control grants the product's users this topic and group.
			"RMQ_EVENTS_TOPIC="+cfg.Topic,
			"RMQ_NOTIFIER_GROUP="+cfg.Group,
		),
		logDir: filepath.Join(cfg.RunDir, "logs"),
		log:    log,
	}
}

// newNotifyPG drives a second Postgres cluster, the notifier's own (-notify-cluster), at the
// port after the wallet's and under a directory of its own in the run's.
func newNotifyPG(cfg config, log *slog.Logger) *services {
	return &services{
		root: cfg.Root,
		env: append(os.Environ(),
			"WALLETSAGA_RUN_DIR="+filepath.Join(cfg.RunDir, "notify-pg"),
			"PG_PORT="+strconv.Itoa(cfg.PGPort+1),
			"PG_SYNCHRONOUS_COMMIT=on",
		),
		logDir: filepath.Join(cfg.RunDir, "logs", "notify-pg"),
		log:    log,
	}
}

// devRunDir is where the dev stack keeps its state, and the broker's jars the run reuses:
// WALLETSAGA_RUN_DIR as scripts/services.sh reads it, or the repository's .run.
func devRunDir(root string) string {
	if d := os.Getenv("WALLETSAGA_RUN_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, ".run")
}

// run runs services.sh with args, its output appended to logs/services.log.
func (s *services) run(ctx context.Context, args ...string) (err error) {
	logPath := filepath.Join(s.logDir, "services.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fmt.Fprintf(f, "==== services.sh %s %s\n", strings.Join(args, " "), time.Now().Format(time.RFC3339Nano))
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "scripts", "services.sh"), args...)
	cmd.Env, cmd.Stdout, cmd.Stderr, cmd.Dir = s.env, f, f, s.root
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("services.sh %s: %w; end of %s:\n%s", strings.Join(args, " "), err, logPath, procs.Tail(logPath, 2000))
	}
	return nil
}

// slot is one service process the run keeps alive: it is started, killed, restarted and, for
// notifier-2, scaled away and back. A slot keeps its address across restarts, so clients
// can come back to it: its first process binds a port of its own (see procs), and each later
// one is started on the address the first reported. Its operations hold the slot's lock from
// start to end, so faults that overlap (a kill while the previous restart still waits for the
// broker) apply one after the other, and never two processes run for one slot.
type slot struct {
	name, bin, logPath string
	args               []string
	env                map[string]string
	log                *slog.Logger

	mu     sync.Mutex
	addr   string // empty until the first process bound one
	p      *procs.Proc
	wanted bool // the slot should be running (false while scaled away)
	starts int
	// unexpected counts exits the run did not cause.
	unexpected int
}

// up starts the slot's process unless it runs.
func (s *slot) up(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wanted = true
	if s.p != nil {
		return nil
	}
	return s.startLocked(ctx)
}

// crash kills the process with SIGKILL and, after downFor, starts it again. A slot scaled
// away is left alone.
func (s *slot) crash(ctx context.Context, downFor time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wanted {
		s.log.Info("kill skipped: the slot is scaled away", "slot", s.name)
		return nil
	}
	p := s.p
	s.p = nil
	p.Kill()
	time.Sleep(downFor)
	return s.startLocked(ctx)
}

// freeze stops the process with SIGSTOP, calls frozen, and resumes it with SIGCONT after
// d (or when ctx ends). It returns false, doing nothing, when the slot is scaled away or its
// process is not running. The slot's other operations wait until it is resumed.
func (s *slot) freeze(ctx context.Context, d time.Duration, frozen func()) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wanted || s.p == nil {
		s.log.Info("freeze skipped: the slot is not running", "slot", s.name)
		return false, nil
	}
	pid := s.p.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return false, fmt.Errorf("%s: SIGSTOP: %w", s.name, err)
	}
	frozen()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return true, fmt.Errorf("%s: SIGCONT: %w", s.name, err)
	}
	return true, nil
}

// down stops the process with SIGTERM (SIGKILL after timeout) and keeps it stopped.
func (s *slot) down(timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wanted = false
	p := s.p
	s.p = nil
	return p.Stop(timeout)
}

// startLocked starts the process, retrying while the stack is restarting underneath it (a
// process that cannot reach Postgres or the broker at start exits non-zero), for up to two
// minutes.
func (s *slot) startLocked(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := procs.Start(ctx, procs.Spec{Name: s.name, Bin: s.bin, Args: s.args, Env: s.env, Addr: s.addr, Log: s.logPath, Ready: "/healthz", Timeout: 60 * time.Second})
		if err == nil {
			s.p, s.addr = p, p.Addr
			s.starts++
			go s.watch(p)
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		s.log.Warn("start failed; retrying", "slot", s.name, "err", firstLine(err.Error()))
		time.Sleep(time.Second)
	}
}

// watch reports an exit the run did not cause: the process is still the slot's when it ends.
func (s *slot) watch(p *procs.Proc) {
	<-p.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == p {
		s.unexpected++
		_, err := p.Exited()
		s.log.Error("process exited on its own", "slot", s.name, "err", err, "log", s.logPath)
		s.p = nil
	}
}

func (s *slot) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p != nil
}

// pid is the slot's process id, 0 when it is not running.
func (s *slot) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return 0
	}
	return s.p.Pid()
}

// url is the slot's address, once its first process has started.
func (s *slot) url() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
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
			s.bin, s.args, s.env = filepath.Join(r.startBinDir(), "walletsvc"), []string{"serve"}, walletEnv
		} else {
			// Each notifier keeps its name across restarts, so a restarted one takes its queues
			// back at once (see CONSUMER_INSTANCE).
			env := maps.Clone(notifierEnv)
			env["CONSUMER_INSTANCE"] = name
			s.bin, s.args, s.env = filepath.Join(r.startBinDir(), "notifier"), []string{"run"}, env
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

// brokerPort is where scripts/services.sh has broker name listen: -broker-port for broker-a,
// 20 ports up for each next one.
func (r *chaosRun) brokerPort(name string) int {
	return r.cfg.BrokerPort + 20*int(name[len(name)-1]-'a')
}
