package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/migrations"
)

// run is walletsvc's cli.Run: serve (the service) or migrate.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := cli.Command(stdout, "walletsvc", args, spec.Commands)
	if sub == "" {
		return err // the version is printed, or the command is unknown
	}
	cfg, rest, err := parseConfig(sub, args, getenv, stderr)
	if err != nil || len(rest) > 0 {
		return cli.Stop(err, rest)
	}
	log, err := cli.Logger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	ordering.RouteClientLogs(log)
	if sub == "migrate" {
		return migrate(ctx, cfg, log)
	}
	return cli.Traced(ctx, "walletsvc", getenv, log, func() error { return serve(ctx, cfg, log) })
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.MigrateOnStart {
		if err := migrate(ctx, cfg, log); err != nil {
			return err
		}
	}
	pool, err := cfg.OpenPool(ctx, log, int32(cfg.SagaWorkers)+8) //nolint:gosec // G115: validate keeps SAGA_WORKERS within 1–1024
	if err != nil {
		return err
	}
	defer pool.Close()
	logSettings(cfg, log)
	w, err := build(cfg, log, pool)
	defer w.close()
	if err != nil {
		return err
	}

	// Stopped in reverse: the HTTP server first (requests in flight still run their sagas),
	// then the sagas left running in the background and recovery (an attempt in flight is
	// abandoned and recovered later with the same key), then the relay, which publishes what
	// they committed; the pool and the producer close after all of them.
	var g lifecycle.Group
	g.Add("broker watch", w.broker)
	g.Add("outbox relay", w.relay)
	g.Add("retention", w.pruner)
	g.Add("saga recovery", w.engine.Recovery())
	g.Add("http server", w.server)
	err = lifecycle.Run(ctx, &g, w.server.Stopped(), cfg.ShutdownTimeout)
	log.Info("walletsvc stopped")
	return err
}

// migrate applies the wallet's migrations.
func migrate(ctx context.Context, cfg config, log *slog.Logger) error {
	return cfg.Migrate(ctx, log, "database migrated", migrations.Wallet.Migrate)
}
