package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/migrations"
)

// run is walletsvc's cli.Run: serve (the service), migrate or new-epoch.
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
	cfg.LogDatabaseTLS(log)
	switch sub {
	case "migrate":
		return migrate(ctx, cfg, log)
	case "new-epoch":
		return newEpoch(ctx, cfg, log, stdout)
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
	// Before anything is written: a database restored or copied while the service was
	// stopped begins a new epoch here, so that no event of the rewound history is sent
	// under a seq the notifier has finished.
	epochs := wallet.NewEpochs(pool)
	checked, err := epochs.Check(ctx)
	if err != nil {
		return err
	}
	wallet.LogEpochCheck(ctx, log, checked)
	w, err := build(ctx, cfg, log, pool, epochs, checked)
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
	g.Add("epoch watch", w.epochs)
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

// newEpoch begins a new epoch of the wallet's balance events, for an operator who put back
// a history the epoch check cannot see rewound (docs/OPERATIONS.md, "Restoring a backup").
func newEpoch(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	if strings.TrimSpace(cfg.EpochReason) == "" {
		return errors.New("new-epoch: say why with --epoch-reason (EPOCH_REASON); it is recorded with the epoch")
	}
	pool, err := cfg.OpenPool(ctx, log, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	ep, err := wallet.NewEpochs(pool).Begin(ctx, strings.TrimSpace(cfg.EpochReason))
	if err != nil {
		return err
	}
	log.Warn("a new epoch of balance events begins: the notifier sets aside what it holds of the replaced history from each user's next seq on", "epoch", ep.Epoch)
	_, err = fmt.Fprintf(stdout, "epoch %d began at %s\n", ep.Epoch, ep.MintedAt.UTC().Format(time.RFC3339Nano))
	return err
}
