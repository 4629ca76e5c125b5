package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/redact"
)

// run is providersim's cli.Run: serve (the simulator) or outage.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := cli.Command(stdout, "providersim", args, commands)
	if sub == "" {
		return err // the version is printed, or the command is unknown
	}
	cfg, rest, err := parseConfig(sub, args, getenv, stderr)
	if err != nil {
		return cli.Stop(err, nil)
	}
	log, err := cli.Logger(stdout, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	switch sub {
	case "serve":
		return serve(ctx, cfg, log)
	case "outage":
		return outage(ctx, cfg, rest, stdout)
	default:
		return fmt.Errorf("unknown command %q (serve, outage)", sub)
	}
}

// outage switches an outage of the running simulator at PROVIDERSIM_URL on, or off for 0s:
// providersim outage gateway|merchant fail|timeout DURATION.
func outage(ctx context.Context, cfg config, args []string, stdout io.Writer) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: providersim outage [--providersim-url http://…] gateway|merchant fail|timeout DURATION (e.g. 60s; 0s ends it), got %q", args)
	}
	d, err := time.ParseDuration(args[2])
	if err != nil {
		return fmt.Errorf("outage: duration %q: %w", args[2], err)
	}
	if err := providersim.RequestOutage(ctx, cfg.URL, cfg.Token, args[0], args[1], d); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "simulated %s outage (%s) for %s at %s\n", args[0], args[1], d, redact.URL(cfg.URL))
	return nil
}

func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.Mode != cli.Dev {
		return fmt.Errorf("refusing to start in %s mode: the simulator approves any payment source and runs only with %s=dev", cfg.Mode, cli.ModeEnv)
	}
	var store providersim.Store = providersim.NewMemoryStore()
	if cfg.DatabaseURL != "" {
		pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 16})
		if err != nil {
			return err
		}
		defer pool.Close()
		v, err := providersim.Migrate(ctx, pool, log)
		if err != nil {
			return err
		}
		log.Info("providersim schema migrated", "version", v)
		store = providersim.NewPostgresStore(pool)
	}
	sim, err := providersim.New(store, providersim.Options{Token: cfg.Token, Latency: cfg.Latency, FailureRate: cfg.FailureRate, Logger: log})
	if err != nil {
		return err
	}
	srv := cli.NewServer(cfg.HTTPAddr, cfg.AddrFile, newServer(sim), log, "providersim listening", "store", storeName(cfg))
	// Calls hanging in a timing-out outage or a latency are released as the server shuts
	// down, so the shutdown does not wait for them.
	stop := context.AfterFunc(ctx, sim.Close)
	defer stop()
	var g lifecycle.Group
	g.Add("http server", srv)
	err = lifecycle.Run(ctx, &g, srv.Stopped(), cfg.ShutdownTimeout)
	log.Info("providersim stopped")
	return err
}

func storeName(cfg config) string {
	if cfg.DatabaseURL == "" {
		return "memory"
	}
	return "postgres " + redact.URL(cfg.DatabaseURL)
}
