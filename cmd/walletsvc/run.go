package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// run is the whole program: it returns when ctx is cancelled (SIGINT/SIGTERM) and everything
// it started has stopped.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if cli.AskedVersion(args) {
		return cli.PrintVersion(stdout, "walletsvc")
	}
	sub := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "serve", "migrate":
	default:
		return fmt.Errorf("unknown command %q (serve, migrate; -h lists them)", sub)
	}
	cfg, rest, err := parseConfig(sub, args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed; asking for it is not a failure
	}
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	log, err := cli.Logger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	ordering.RouteClientLogs(log)
	switch sub {
	case "serve":
		shutdown, err := telemetry.Setup(ctx, "walletsvc", getenv)
		if err != nil {
			return err
		}
		defer telemetry.Flush(shutdown, log)
		return serve(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	default:
		return fmt.Errorf("unknown command %q (serve, migrate, sim-outage)", sub)
	}
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.MigrateOnStart {
		if err := migrate(ctx, cfg, log); err != nil {
			return err
		}
	}
	pool, err := openPool(ctx, cfg, log)
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
