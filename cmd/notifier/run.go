package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/notify/instance"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/migrations"
)

// run is the notifier's cli.Run: run (the consumer and delivery), migrate, or sms-log,
// which prints one user's SMS log.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := cli.Command(stdout, "notifier", args, spec.Commands)
	if sub == "" {
		return err // the version is printed, or the command is unknown
	}
	cfg, rest, err := parseConfig(sub, args, getenv, stderr)
	if err != nil || len(rest) > 0 {
		return cli.Stop(err, rest)
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
	cfg.LogDatabaseTLS(log)
	switch sub {
	case "migrate":
		return migrate(ctx, cfg, log)
	case "sms-log":
		return printSMSLog(ctx, cfg, stdout)
	}
	return cli.Traced(ctx, "notifier", getenv, log, func() error { return serve(ctx, cfg, log, stdout) })
}

// printSMSLog prints the SMS log of --user to stdout, and with --follow what comes after it
// until ctx ends.
func printSMSLog(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.SMSLogUser <= 0 {
		return errors.New("sms-log: --user must be a positive user id")
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 2, StatementTimeout: cfg.StatementTimeout})
	if err != nil {
		return err
	}
	defer pool.Close()
	err = smslog.PrintSMSLog(ctx, smslog.NewStore(pool), cfg.SMSLogUser, cfg.SMSLogFollow, stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	if cfg.MigrateOnStart {
		if err := migrate(ctx, cfg, log); err != nil {
			return err
		}
	}
	// The consumer acknowledges a message to the broker once its inbox row is committed.
	pool, err := cfg.OpenPool(ctx, log, 24)
	if err != nil {
		return err
	}
	defer pool.Close()
	logSettings(cfg, log)
	n, err := build(ctx, cfg, log, pool, stdout)
	defer n.close()
	if err != nil {
		return err
	}

	// The consumer's name is taken first (a second live process under it refuses to start)
	// and given up last. Stopped in reverse: intake first (the HTTP server, then the consumer, which lets the
	// batch in flight be recorded, its offsets then persisted by the client, the inbox writer
	// and the DLQ watcher), then delivery (each worker finishes the SMS in hand and gives its user back),
	// then retention, the dead-letter publisher and the broker watch; the pool closes after all of them.
	// The consumer and the watcher start in the background: the notifier serves and delivers
	// its inbox while the broker is away.
	var g lifecycle.Group
	if cfg.Instance != "" {
		g.Add("CONSUMER_INSTANCE", instance.New(pool, cfg.Group, cfg.Instance, log))
	}
	g.Add("broker watch", n.broker)
	g.Add("dead-letter publisher", n.publisher)
	g.Add("retention", n.pruner)
	g.Add("lanes", n.lanes)
	if n.watcher != nil {
		g.Add("DLQ watcher", n.watcher)
	}
	g.Add("inbox writer", n.inbox)
	g.Add("consumer", n.consumer)
	g.Add("http server", n.server)
	err = lifecycle.Run(ctx, &g, n.server.Stopped(), cfg.ShutdownTimeout)
	ls, is := n.lanes.Stats(), n.inbox.Stats()
	log.Info("notifier stopped", "received", is.Received, "duplicates", is.Ignored, "bad", is.Bad, "sent", ls.Sent,
		"retries", ls.Retried, "postponed", ls.Postponed, "dead_lettered", ls.DeadLettered, "dlq_published", n.publisher.Published())
	return err
}

// migrate applies the notifier's migrations (schema notify).
func migrate(ctx context.Context, cfg config, log *slog.Logger) error {
	return cfg.Migrate(ctx, log, "notifier schema migrated", migrations.Notify.Migrate)
}
