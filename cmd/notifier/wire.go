package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/groupstart"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/instance"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/retention"
)

// notifier is the notifier's parts, built and not started yet.
type notifier struct {
	broker    *ordering.BrokerWatch
	publisher *deadletters.Publisher
	lanes     *gate.Lanes
	inbox     *inbox.Inbox
	consumer  *ordering.OrderlyConsumer
	watcher   *ordering.DLQWatcher // nil unless RECONCILE
	pruner    *retention.Pruner
	server    *httpx.Server
	closers   cli.Closers // the clients to close once everything stopped
}

// close closes the clients build opened, in reverse.
func (n *notifier) close() { n.closers.Close() }

// build wires the notifier's parts over pool. The caller closes what it returns, also when
// it returns an error.
func build(ctx context.Context, cfg config, log *slog.Logger, pool *pgxpool.Pool, stdout io.Writer) (*notifier, error) {
	n := &notifier{}
	namesrv, creds, broker, err := cfg.Broker(ctx, &n.closers)
	if err != nil {
		return n, err
	}
	sender, err := senders.New(senders.Settings{Kind: cfg.Sender, WebhookURL: cfg.WebhookURL, WebhookToken: cfg.WebhookToken,
		Timeout: cfg.SendTimeout, Conns: cfg.Workers, FailPhone: cfg.FailPhone, FailAmount: cfg.FailAmount, Out: stdout})
	if err != nil {
		return n, fmt.Errorf("SMS_WEBHOOK_URL: %w", err)
	}
	reg := metrics.NewRegistry()
	metrics.NewBroker(reg, broker.Reachable)
	sender = senders.ObservedSender{Inner: sender, Observe: metrics.NewSMS(reg)}
	gates, bad := gate.NewStore(pool), inbox.NewStore(pool)

	dlqProducer, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: namesrv, Group: cfg.Group + "-dlq-publisher",
		Instance: instance.Suffixed(cfg.Instance, "-dlq-publisher"), Credentials: creds, Logger: log})
	if err != nil {
		return n, err
	}
	// Closed on the way out: an unpublished dead letter stays recorded in Postgres.
	n.closers = append(n.closers, func() { _ = dlqProducer.Shutdown() })
	dlq := ordering.NewDeadLetterPublisher(dlqProducer, cfg.Group)
	publisher := deadletters.NewPublisher(gates, bad, dlq, 0, log)
	dlqRoute := ordering.NewRouteCheck(namesrv, dlq.Topic(), creds)
	rctx, cancelRoute := context.WithTimeout(ctx, 3*time.Second)
	err = dlqRoute.Check(rctx)
	cancelRoute()
	if err != nil {
		// Not fatal: dead letters stay recorded in Postgres and are published once it exists.
		log.Error("the dead-letter topic is not writable; dead letters are kept in Postgres until it is (create it: mqadmin updateTopic -t '"+
			dlq.Topic()+"' -r 1 -w 1)", "topic", dlq.Topic(), "err", err)
	}
	_ = dlqRoute.Close()
	breaker := senders.NewBreaker(senders.BreakerConfig{Failures: cfg.BreakerFailures, Open: cfg.BreakerOpen, OpenMax: cfg.BreakerOpenMax,
		OnChange: func(from, to string) { log.Warn("SMS provider breaker", "from", from, "to", to) }})
	lanes, err := gate.NewLanes(gates, gate.LaneConfig{
		Workers: cfg.Workers, Owner: instance.LaneOwner(cfg.Instance), Lease: cfg.LaneLease, SendTimeout: cfg.SendTimeout, Poll: cfg.LanePoll,
		Policy: cfg.Retry, Breaker: breaker, Sender: sender, DeadLettered: publisher.Wake, Logger: log,
		ObserveSent: metrics.NewCommitToSMS(reg),
	})
	if err != nil {
		return n, err
	}
	in := inbox.NewInbox(bad, gates, func(r inbox.Received) {
		if r.Woken > 0 {
			lanes.Wake()
		}
		if r.Bad > 0 {
			publisher.Wake()
		}
	}, log)
	in.HandTo(lanes)
	// CONSUME_FROM=last is a one-shot: the group's first start, recorded in its database,
	// starts the queues it found at their end; anything else starts a queue without an
	// offset at its first message.
	starts := groupstart.NewPlan(groupstart.NewStore(pool), cfg.Group, cfg.Topic, cfg.ConsumeFrom, cfg.Instance, log)
	consumer, err := ordering.NewOrderlyConsumer(ordering.ConsumerConfig{
		Namesrv: namesrv, Group: cfg.Group, Topic: cfg.Topic,
		BatchSize: cfg.ConsumeBatch, Buffer: cfg.ConsumeBuffer, PullWait: cfg.ConsumePullWait,
		HandlerTimeout: cfg.HandlerTimeout, SuspendDelay: cfg.SuspendDelay,
		FromFirstOffset: cfg.ConsumeFrom == "first", StartAtEnd: starts.AtEnd, Instance: cfg.Instance, Credentials: creds, Logger: log,
	}, consume(in.Handle))
	if err != nil {
		return n, err
	}
	var watcher *ordering.DLQWatcher
	if cfg.Reconcile {
		reconciler := deadletters.NewReconciler(gates, bad, log)
		metrics.NewDLQForeign(reg, reconciler.Foreign)
		watcher, err = ordering.NewDLQWatcher(ordering.DLQWatcherConfig{Namesrv: namesrv, Group: cfg.Group, Instance: instance.Suffixed(cfg.Instance, "-dlq"), Credentials: creds, Logger: log}, reconcile(reconciler.Handle))
		if err != nil {
			return n, err
		}
	}

	metrics.NewNotifier(reg, metrics.Notifier{
		Lanes: lanes.Stats, Inbox: in.Stats, Busy: lanes.Busy, Breaker: breaker.State,
		View:       func(ctx context.Context) (gate.View, error) { return gates.View(ctx, 0, cfg.GapAlertAfter) },
		DLQBacklog: publisher.Backlog, InboxWriter: in.WriterStats, Recorder: lanes.RecorderStats,
	})
	metrics.NewDLQ(reg, smslog.NewStore(pool).DLQDepth)
	operator := deadletters.NewOperator(pool, gates, sender)
	if n.pruner, err = newPruner(cfg, log, reg, gates, bad, operator); err != nil {
		return n, err
	}
	view := &httpapi.Gate{Store: gates, Lanes: lanes, Inbox: in, DLQBacklog: publisher.Backlog, GapAlertAfter: cfg.GapAlertAfter}
	e := newServer(cfg, log, pool, view, operator, reg,
		httpx.Check{Name: "postgres", Fn: pool.Ping},
		httpx.Check{Name: "rocketmq", Fn: broker.Check, Degraded: "no new balance events are received; the SMS already in the inbox are delivered and the read API serves"},
		httpx.Check{Name: "consumer", Fn: func(context.Context) error { return consumer.Err() }, Degraded: "not consuming yet; it keeps trying to start"},
	)
	metrics.NewConsumer(reg, consumer.Running, consumer.Assignment)
	n.server = cli.NewServer(cfg.HTTPAddr, cfg.AddrFile, e, log, "notifier listening", "mode", cfg.Mode, "namesrv", cfg.Namesrv, "topic", cfg.Topic,
		"group", cfg.Group, "sender", cfg.Sender, "workers", cfg.Workers, "consume_from", cfg.ConsumeFrom,
		"max_attempts", cfg.Retry.MaxAttempts, "dead_letter_after", cfg.Retry.DeadLetterAfter)
	n.broker, n.publisher, n.lanes, n.inbox, n.consumer, n.watcher = broker, publisher, lanes, in, consumer, watcher
	return n, nil
}

// logSettings says at start which settings leave something open or off.
func logSettings(cfg config, log *slog.Logger) {
	cfg.LogStart(log, "documented tokens, the log sender and the failure switches are accepted", "replay, skip")
	switch {
	case cfg.ReadToken == "" && cfg.Operators.Len() == 0:
		log.Warn("READ_TOKEN and OPERATOR_TOKENS are not set: the SMS log API and the page's data answer 403 (set READ_TOKEN to read them)")
	case cfg.ReadToken == "":
		log.Info("READ_TOKEN is not set: the read endpoints take only the operators' tokens")
	}
	if cfg.FailPhone != nil || cfg.FailAmount != 0 {
		pattern := "off"
		if cfg.FailPhone != nil {
			pattern = cfg.FailPhone.String()
		}
		log.Warn("SMS failure switches are on: matching SMS always fail and are dead-lettered (demo and test settings)",
			"phone_pattern", pattern, "amount", cfg.FailAmount)
	}
}
