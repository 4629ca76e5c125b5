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
	"github.com/walletsaga/walletsaga/internal/notify/instance"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// run is the whole program: it returns when ctx is cancelled (SIGINT/SIGTERM) and everything
// it started has stopped.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if cli.AskedVersion(args) {
		return cli.PrintVersion(stdout, "notifier")
	}
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
	case "run", "migrate":
	case "sms-log":
		extra = func(fs *flag.FlagSet) {
			fs.Int64Var(&userID, "user", 0, "user id whose SMS log to print (required)")
			fs.BoolVar(&follow, "follow", false, "keep printing new SMS until interrupted")
		}
	default:
		return fmt.Errorf("unknown command %q (run, migrate, sms-log; -h lists them)", sub)
	}
	cfg, rest, err := parseConfig(sub, args, getenv, stderr, extra)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed; asking for it is not a failure
	}
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
	if sub == "migrate" {
		return migrate(ctx, cfg, log)
	}
	if sub == "sms-log" {
		if userID <= 0 {
			return errors.New("sms-log: --user must be a positive user id")
		}
		pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 2, StatementTimeout: cfg.StatementTimeout})
		if err != nil {
			return err
		}
		defer pool.Close()
		err = smslog.PrintSMSLog(ctx, smslog.NewStore(pool), userID, follow, stdout)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	shutdown, err := telemetry.Setup(ctx, "notifier", getenv)
	if err != nil {
		return err
	}
	defer telemetry.Flush(shutdown, log)
	return serve(ctx, cfg, log, stdout)
}

func serve(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
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
		g.Add("CONSUMER_INSTANCE", instance.New(pool, cfg.ConsumerGroup, cfg.Instance, log))
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
