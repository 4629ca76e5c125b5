package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
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
		return serve(ctx, cfg, log)
	case "migrate":
		return migrate(ctx, cfg, log)
	default:
		return fmt.Errorf("unknown command %q (serve, migrate)", sub)
	}
}

func openPool(ctx context.Context, cfg config) (*pgxpool.Pool, error) {
	return pg.Open(ctx, cfg.DatabaseURL, int32(cfg.SagaWorkers)+8)
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
	defer route.Close() //nolint:errcheck

	e := httpx.New(httpx.Options{Logger: log})
	httpx.Probes(e,
		httpx.Check{Name: "postgres", Fn: pool.Ping},
		httpx.Check{Name: "rocketmq", Fn: route.Check},
	)

	err = httpx.Serve(ctx, cfg.HTTPAddr, e, cfg.ShutdownTimeout, log, func(a net.Addr) {
		log.Info("walletsvc listening", "addr", a.String(), "namesrv", cfg.Namesrv, "topic", cfg.Topic)
	})
	log.Info("walletsvc stopped")
	return err
}
