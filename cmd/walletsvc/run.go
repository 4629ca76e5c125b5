package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/migrations"
)

// run is the whole program: it returns when ctx is cancelled (SIGINT/SIGTERM) and everything
// it started has stopped.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	cfg, rest, err := parseConfig("walletsvc "+sub, args, getenv, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 && sub != "sim-outage" {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	log, err := cli.Logger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	ordering.RouteClientLogs(log)
	switch sub {
	case "serve":
		return serve(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	case "sim-outage":
		return simOutage(ctx, cfg, rest, stdout)
	default:
		return fmt.Errorf("unknown command %q (serve, migrate, sim-outage)", sub)
	}
}

// simOutage switches the outage of a built-in simulator on (or off, for 0s) in the database
// every replica shares: walletsvc sim-outage gateway|merchant fail|timeout DURATION.
func simOutage(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: walletsvc sim-outage gateway|merchant fail|timeout DURATION (e.g. 60s; 0s ends it), got %q", args)
	}
	d, err := time.ParseDuration(args[2])
	if err != nil {
		return fmt.Errorf("sim-outage: duration %q: %w", args[2], err)
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := wallet.SetSimOutage(ctx, pool, args[0], args[1], d); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "simulated %s outage (%s) for %s\n", args[0], args[1], d)
	return nil
}

func openPool(ctx context.Context, cfg config) (*pgxpool.Pool, error) {
	return pg.Open(ctx, cfg.DatabaseURL, int32(cfg.SagaWorkers)+8) //nolint:gosec // G115: Validate keeps SAGA_WORKERS within 1–1024
}

func migrate(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	v, err := migrations.Migrate(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info("database migrated", "version", v)
	return nil
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if cfg.MigrateOnStart {
		v, err := migrations.Migrate(ctx, pool, log)
		if err != nil {
			return err
		}
		log.Info("database migrated", "version", v)
	}
	namesrv := cli.SplitList(cfg.Namesrv)
	route := ordering.NewRouteCheck(namesrv, cfg.Topic)
	defer route.Close() //nolint:errcheck // on the way out: nothing is left to do about a failed close

	producer, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: namesrv, Group: cfg.ProducerGroup, Hash: ordering.KeyHash(cfg.QueueHash), Logger: log})
	if err != nil {
		return err
	}
	defer producer.Shutdown() //nolint:errcheck // on the way out, after the relay stopped: nothing is left to send

	if cfg.ServiceToken == DevServiceToken {
		log.Warn("SERVICE_TOKEN is the documented dev default: anyone who read the README can use the wallet API; set SERVICE_TOKEN or SERVICE_TOKEN_FILE")
	}
	if cfg.AdminToken == "" {
		log.Info("ADMIN_TOKEN is not set: the operator endpoints (saga retry/resolve) are disabled")
	}
	reg := metrics.NewRegistry()
	// The engine observes into the saga metrics, which count through the engine; its commits
	// that ran local steps (which write outbox rows) wake the relay.
	var engine *saga.Engine
	var relay *ordering.Relay
	sagaMetrics := metrics.NewSaga(reg, func(ctx context.Context) ([]saga.KindStateCount, error) { return engine.CountByKindState(ctx) })
	engine = saga.New(pool, saga.Options{Workers: cfg.SagaWorkers, Logger: log, Observer: sagaMetrics,
		Committed: func(locals int) {
			if locals > 0 {
				relay.Wake()
			}
		}})
	sim := wallet.SimOptions{Latency: cfg.SimLatency, FailureRate: cfg.SimFailureRate}
	svc, err := wallet.NewService(pool, engine, wallet.NewSimGateway(pool, sim), wallet.NewSimMerchant(pool, sim),
		wallet.Options{Logger: log, Steps: wallet.StepTuning{Window: cfg.SagaRetryWindow}})
	if err != nil {
		return err
	}
	outbox := wallet.NewOutboxStore(pool, int64(cfg.RelayLockKey), time.Second)
	metrics.NewOutbox(reg, outbox.Backlog)
	observeSend := metrics.NewRelay(reg, func() ordering.RelayStats { return relay.Stats() })
	relay, err = ordering.NewRelay(outboxAdapter{outbox}, producer, ordering.RelayConfig{
		Topic: cfg.Topic, Batch: cfg.RelayBatch, Logger: log, ObserveSend: observeSend,
	})
	if err != nil {
		return err
	}

	e := newServer(cfg, log, svc, reg,
		httpx.Check{Name: "postgres", Fn: pool.Ping},
		httpx.Check{Name: "rocketmq", Fn: route.Check},
	)

	// Background work stops after the HTTP server, so requests in flight can still run their
	// sagas; recovery and the relay then finish what they hold and return.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	bgErr := make(chan error, 2)
	for name, fn := range map[string]func(context.Context) error{"saga engine": engine.Run, "outbox relay": relay.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(bgCtx); err != nil {
				bgErr <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	err = httpx.Serve(ctx, cfg.HTTPAddr, e, cfg.ShutdownTimeout, log, func(a net.Addr) {
		log.Info("walletsvc listening", "addr", a.String(), "namesrv", cfg.Namesrv, "topic", cfg.Topic)
		if err := cli.WriteAddrFile(cfg.AddrFile, a); err != nil {
			log.Error("cannot tell the address bound", "err", err)
		}
	})
	// Sagas requests left running in the background stop first (an attempt in flight is
	// abandoned and recovered later with the same key), then recovery and the relay.
	engine.Close()
	stopBG()
	wg.Wait()
	close(bgErr)
	for berr := range bgErr {
		err = errors.Join(err, berr)
	}
	log.Info("walletsvc stopped")
	return err
}
