package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// walletsvc is the service's parts, built and not started yet.
type walletsvc struct {
	broker  *ordering.BrokerWatch
	epochs  *lifecycle.Runner
	relay   *ordering.Relay
	engine  *saga.Engine
	pruner  *retention.Pruner
	server  *httpx.Server
	closers cli.Closers // the clients to close once everything stopped
}

// close closes the clients build opened, in reverse.
func (w *walletsvc) close() { w.closers.Close() }

// build wires the service's parts over pool; checked is the epoch check made before it. The
// caller closes what it returns, also when it returns an error.
func build(ctx context.Context, cfg config, log *slog.Logger, pool *pgxpool.Pool, epochs *wallet.Epochs, checked wallet.EpochCheck) (*walletsvc, error) {
	w := &walletsvc{}
	namesrv, creds, broker, err := cfg.Broker(ctx, &w.closers)
	if err != nil {
		return w, err
	}
	producer, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: namesrv, Group: cfg.Group, Credentials: creds, Hash: ordering.KeyHash(cfg.QueueHash), Logger: log})
	if err != nil {
		return w, err
	}
	// Closed on the way out, after the relay stopped: nothing is left to send.
	w.closers = append(w.closers, func() { _ = producer.Shutdown() })

	reg := metrics.NewRegistry()
	metrics.NewBroker(reg, broker.Reachable)
	observeEpoch := metrics.NewWalletEpoch(reg)
	observeEpoch(checked)
	w.epochs = lifecycle.NewRunner((&wallet.EpochWatch{Epochs: epochs, Interval: cfg.EpochCheckInterval, Log: log, OnCheck: observeEpoch}).Run)
	// The engine observes into the saga metrics, which count through the engine.
	var engine *saga.Engine
	var relay *ordering.Relay
	sagaMetrics := metrics.NewSaga(reg, func(ctx context.Context) ([]saga.KindStateCount, error) { return engine.CountByKindState(ctx) })
	engine = saga.New(pool, saga.Options{Workers: cfg.SagaWorkers, Logger: log, Observer: sagaMetrics})
	metrics.NewGroupCommit(reg, metrics.WriterSagaCommits, func() groupcommit.Stats {
		s := engine.CommitStats()
		return groupcommit.Stats{Groups: s.Groups, Requests: s.Commits, Rows: s.Commits}
	})
	gateway, err := provider.NewGateway(provider.Options{URL: cfg.GatewayURL, Token: cfg.GatewayToken, Timeout: cfg.ProviderTimeout})
	if err != nil {
		return w, err
	}
	merchant, err := provider.NewMerchant(provider.Options{URL: cfg.MerchantURL, Token: cfg.MerchantToken, Timeout: cfg.ProviderTimeout})
	if err != nil {
		return w, err
	}
	// Each balance event a saga commits goes to the relay through the feed, without a read;
	// the relay reads the outbox through it too.
	outbox := wallet.NewOutboxStore(pool, int64(cfg.RelayLockKey), time.Second)
	feed := wallet.NewOutboxFeed(outbox)
	// One attempt of a remote step is one call: the engine's attempt timeout is the
	// provider timeout, so PROVIDER_TIMEOUT is the one that holds.
	svc, err := wallet.NewService(pool, engine, gateway, merchant, wallet.Options{Logger: log,
		Steps: wallet.StepTuning{Window: cfg.SagaRetryWindow, AttemptTimeout: cfg.ProviderTimeout}, EventCommitted: feed.Committed,
		EventVersion: cfg.EventVersion})
	if err != nil {
		return w, err
	}
	metrics.NewOutbox(reg, outbox.Backlog)
	observeSend := metrics.NewRelay(reg, func() ordering.RelayStats { return relay.Stats() })
	relay, err = ordering.NewRelay(feed, producer, ordering.RelayConfig{
		Topic: cfg.Topic, Batch: cfg.RelayBatch, Logger: log, ObserveSend: observeSend,
	})
	if err != nil {
		return w, err
	}
	feed.Wakes(relay)

	e := newServer(cfg, log, svc, reg,
		httpx.Check{Name: "postgres", Fn: pool.Ping},
		httpx.Check{Name: "rocketmq", Fn: broker.Check, Degraded: "balance events wait in the outbox until the broker is reachable"},
	)
	w.server = cli.NewServer(cfg.HTTPAddr, cfg.AddrFile, e, log, "walletsvc listening", "mode", cfg.Mode, "namesrv", cfg.Namesrv, "topic", cfg.Topic,
		"payment_gateway", redact.URL(cfg.GatewayURL), "merchant", redact.URL(cfg.MerchantURL))
	w.pruner, err = cfg.NewPruner(log, reg, svc.RetentionTables(outbox, wallet.RetentionWindows{Outbox: cfg.RetentionOutbox, Sagas: cfg.RetentionSagas,
		Operations: cfg.RetentionOperations, IdempotencyKeys: cfg.RetentionIdempotency, Audit: cfg.RetentionAudit})...)
	if err != nil {
		return w, err
	}
	w.broker, w.relay, w.engine = broker, relay, engine
	return w, nil
}

// logSettings says at start which settings leave something open or off, and who may call
// the wallet API with what.
func logSettings(cfg config, log *slog.Logger) {
	cfg.LogStart(log, "documented tokens and simulated providers are accepted; never use it for real money", "saga retry/resolve")
	logAuth(cfg, log)
	if cfg.EventVersion == 1 {
		log.Warn("EVENT_VERSION=1: balance events are written without the wallet's epoch, as the previous release wrote them; the notifier cannot tell them from a restored history's: restart without it once no replica of the previous release runs")
	}
}

// logAuth says at start who may call the wallet API with what.
func logAuth(cfg config, log *slog.Logger) {
	if cfg.UserTokens == nil {
		log.Info("user tokens are not configured: the service token acts for every user, so whoever holds it (a backend-for-frontend) must itself establish who its users are")
		return
	}
	log.Info("user tokens accepted: each acts for the user it names", "issuer", cfg.JWT.Issuer, "audience", cfg.JWT.Audience,
		"user_claim", cfg.JWT.UserClaim, "sources_claim", cfg.JWT.SourcesClaim, "algorithms", strings.Join(cfg.UserTokens.Algorithms(), ","), "keys", len(cfg.UserTokens.Keys()),
		"service_token_scope", cfg.ServiceTokenScope)
	if cfg.ServiceTokenScope == ScopeAll {
		log.Warn("SERVICE_TOKEN_SCOPE=all: beside user tokens, the service token still acts for every user; whoever holds it can move any user's money")
	}
	if cfg.JWT.HMACSecret != "" {
		log.Warn("AUTH_JWT_HMAC_SECRET is set: whoever holds it can sign a token for any user; an identity provider outside this deployment should sign with a private key and give walletsvc its public key (AUTH_JWT_KEYS_FILE)")
	}
}
