package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/pipeline"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/migrations"
)

// run is the whole program: it returns when ctx is cancelled (SIGINT/SIGTERM) and everything
// it started has stopped.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var (
		userID int64
		follow bool
		extra  func(*flag.FlagSet)
	)
	switch sub {
	case "run":
	case "sms-log":
		extra = func(fs *flag.FlagSet) {
			fs.Int64Var(&userID, "user", 0, "user id whose SMS log to print (required)")
			fs.BoolVar(&follow, "follow", false, "keep printing new SMS until interrupted")
		}
	default:
		return fmt.Errorf("unknown command %q (run, sms-log)", sub)
	}
	cfg, rest, err := parseConfig("notifier "+sub, args, getenv, stderr, extra)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	logOut := stdout
	if sub == "sms-log" {
		logOut = stderr // stdout is the SMS log
	}
	log, err := cli.Logger(logOut, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	ordering.RouteClientLogs(log)
	if sub == "sms-log" {
		if userID <= 0 {
			return errors.New("sms-log: --user must be a positive user id")
		}
		pool, err := pg.Open(ctx, cfg.DatabaseURL, 2)
		if err != nil {
			return err
		}
		defer pool.Close()
		err = notify.PrintSMSLog(ctx, notify.NewStore(pool), userID, follow, stdout)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return serve(ctx, cfg, log, stdout)
}

func newSender(cfg config, stdout io.Writer) (notify.Sender, error) {
	var s notify.Sender
	switch cfg.Sender {
	case "webhook":
		w, err := notify.NewWebhookSender(cfg.WebhookURL, cfg.SendTimeout, nil)
		if err != nil {
			return nil, fmt.Errorf("SMS_WEBHOOK_URL: %w", err)
		}
		s = w
	default:
		s = notify.NewLogSender(stdout)
	}
	if cfg.FailPhone == nil && cfg.FailAmount == 0 {
		return s, nil
	}
	return &notify.FailureSwitch{Inner: s, PhonePattern: cfg.FailPhone, FailAmount: cfg.FailAmount}, nil
}

// suffixed returns name+suffix, or "" for "" (a new name per process).
func suffixed(name, suffix string) string {
	if name == "" {
		return ""
	}
	return name + suffix
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	pool, err := pg.Open(ctx, cfg.DatabaseURL, 24)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.MigrateOnStart {
		if _, err := migrations.Migrate(ctx, pool, log); err != nil {
			return err
		}
	}
	if cfg.Instance != "" {
		claim, err := ordering.ClaimInstance(ctx, pool, cfg.ConsumerGroup, cfg.Instance, log)
		if err != nil {
			return fmt.Errorf("CONSUMER_INSTANCE: %w", err)
		}
		defer claim.Release()
	}
	namesrv := cli.SplitList(cfg.Namesrv)
	route := ordering.NewRouteCheck(namesrv, cfg.Topic)
	defer route.Close() //nolint:errcheck

	sender, err := newSender(cfg, stdout)
	if err != nil {
		return err
	}
	if cfg.AdminToken == "" {
		log.Info("ADMIN_TOKEN is not set: the operator endpoints (replay, skip) are disabled")
	}
	reg := metrics.NewRegistry()
	sender = notify.ObservedSender{Inner: sender, Observe: metrics.NewSMS(reg)}
	gate := ordering.NewGate(pool, ordering.GateConfig{
		MaxAttempts: cfg.MaxAttempts, RetryBase: cfg.RetryBase, ParkAfter: cfg.ParkAfter, IsPermanent: pipeline.IsPermanent, Logger: log,
	})
	pipe := pipeline.New(pool, gate, sender, log)
	consumer, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: namesrv, Group: cfg.ConsumerGroup, Topic: cfg.Topic,
		// A backstop only: the gate counts attempts in Postgres and dead-letters explicitly;
		// its retries and waits never spend the client's counter.
		MaxReconsumeTimes: 16,
		HandlerTimeout:    cfg.HandlerTimeout, SuspendDelay: cfg.SuspendDelay,
		FromFirstOffset: true, Instance: cfg.Instance, Logger: log,
	}, pipe.Handle)
	if err != nil {
		return err
	}
	var watcher *ordering.DLQWatcher
	if cfg.Reconcile {
		watcher, err = ordering.NewDLQWatcher(ordering.DLQWatcherConfig{Namesrv: namesrv, Group: cfg.ConsumerGroup, Instance: suffixed(cfg.Instance, "-dlq"), Logger: log}, pipe.Reconcile)
		if err != nil {
			return err
		}
	}

	metrics.NewGate(reg, gate)
	metrics.NewDLQ(reg, notify.NewStore(pool).DLQDepth)
	e := newServer(cfg, log, pool, gate, pipe, sender, reg,
		httpx.Check{Name: "postgres", Fn: pool.Ping},
		httpx.Check{Name: "rocketmq", Fn: route.Check},
	)

	if err := consumer.Start(); err != nil {
		return err
	}
	if watcher != nil {
		if err := watcher.Start(); err != nil {
			_ = consumer.Shutdown(context.Background())
			return err
		}
	}
	drainCtx, stopDrain := context.WithCancel(context.WithoutCancel(ctx))
	drained := make(chan struct{})
	go func() { defer close(drained); pipe.RunDrainer(drainCtx, 500*time.Millisecond) }()
	defer func() { stopDrain(); <-drained }()

	// On SIGTERM: stop taking messages and let the one in flight finish (offsets are then
	// persisted by the client), stop the reconciler, then the HTTP server.
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		err := consumer.Shutdown(sctx)
		if watcher != nil {
			err = errors.Join(err, watcher.Shutdown())
		}
		stopped <- err
	}()
	err = httpx.Serve(ctx, cfg.HTTPAddr, e, cfg.ShutdownTimeout, log, func(a net.Addr) {
		log.Info("notifier listening", "addr", a.String(), "namesrv", cfg.Namesrv, "topic", cfg.Topic,
			"group", cfg.ConsumerGroup, "sender", cfg.Sender, "max_attempts", cfg.MaxAttempts)
	})
	if ctx.Err() == nil {
		// The HTTP server failed on its own: stop the consumer too.
		_ = consumer.Shutdown(context.Background())
		if watcher != nil {
			_ = watcher.Shutdown()
		}
		return err
	}
	err = errors.Join(err, <-stopped)
	st := gate.Stats()
	log.Info("notifier stopped", "sent", st.Sent, "duplicates", st.Duplicate, "waits", st.Waiting, "retries", st.Retrying, "dead_lettered", st.DeadLettered)
	return err
}
