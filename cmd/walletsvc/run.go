package main

import (
	"context"
	"errors"
	"flag"
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
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/telemetry"
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

// openPool opens the service's pool, every connection under the statement and
// idle-in-transaction timeouts, and checks that the database keeps what it acknowledges.
func openPool(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{
		MaxConns:         int32(cfg.SagaWorkers) + 8, //nolint:gosec // G115: validate keeps SAGA_WORKERS within 1–1024
		StatementTimeout: cfg.StatementTimeout, IdleInTxTimeout: cfg.IdleInTxTimeout,
	})
	if err != nil {
		return nil, err
	}
	d, err := pg.ReadDurability(ctx, pool)
	if err == nil {
		err = cli.RequireDurable(cfg.Mode, log, cli.Redact(cfg.DatabaseURL), d.Unsafe(), cfg.UnsafeDurability)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// migrate applies the migrations on a pool of its own, without the statement timeout: a
// migration may rewrite a large table.
func migrate(ctx context.Context, cfg config, log *slog.Logger) error {
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	v, err := migrations.Wallet.Migrate(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info("database migrated", "version", v)
	return nil
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
	namesrv := cli.SplitList(cfg.Namesrv)
	creds := ordering.Credentials{AccessKey: cfg.RocketMQAccessKey, SecretKey: cfg.RocketMQSecretKey}
	route := ordering.NewRouteCheck(namesrv, cfg.Topic, creds)
	defer route.Close() //nolint:errcheck // on the way out: nothing is left to do about a failed close
	broker := ordering.NewBrokerWatch(route, 0)

	producer, err := ordering.NewOrderedProducer(ordering.ProducerConfig{Namesrv: namesrv, Group: cfg.ProducerGroup, Credentials: creds, Hash: ordering.KeyHash(cfg.QueueHash), Logger: log})
	if err != nil {
		return err
	}
	defer producer.Shutdown() //nolint:errcheck // on the way out, after the relay stopped: nothing is left to send

	if cfg.Mode == cli.Dev {
		log.Warn("running in dev mode (WALLETSAGA_ENV=dev): documented tokens and simulated providers are accepted; never use it for real money")
	}
	if cfg.RocketMQAccessKey == "" {
		log.Warn("ROCKETMQ_ACCESS_KEY is not set: requests to the broker are unsigned, so only a broker without access control takes them; it must then be reachable from trusted hosts only")
	}
	if cfg.AdminToken == "" {
		log.Info("ADMIN_TOKEN is not set: the operator endpoints (saga retry/resolve) are disabled")
	}
	logAuth(cfg, log)
	reg := metrics.NewRegistry()
	metrics.NewBroker(reg, broker.Reachable)
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
	gateway, err := provider.NewGateway(provider.Options{URL: cfg.GatewayURL, Token: cfg.GatewayToken, Timeout: cfg.ProviderTimeout})
	if err != nil {
		return err
	}
	merchant, err := provider.NewMerchant(provider.Options{URL: cfg.MerchantURL, Token: cfg.MerchantToken, Timeout: cfg.ProviderTimeout})
	if err != nil {
		return err
	}
	// One attempt of a remote step is one call: the engine's attempt timeout is the
	// provider timeout, so PROVIDER_TIMEOUT is the one that holds.
	svc, err := wallet.NewService(pool, engine, gateway, merchant,
		wallet.Options{Logger: log, Steps: wallet.StepTuning{Window: cfg.SagaRetryWindow, AttemptTimeout: cfg.ProviderTimeout}})
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
		httpx.Check{Name: "rocketmq", Fn: broker.Check, Degraded: "balance events wait in the outbox until the broker is reachable"},
	)

	// Background work stops after the HTTP server, so requests in flight can still run their
	// sagas; recovery and the relay then finish what they hold and return.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	bgErr := make(chan error, 2)
	wg.Go(func() { broker.Run(bgCtx) })
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
		log.Info("walletsvc listening", "addr", a.String(), "mode", cfg.Mode, "namesrv", cfg.Namesrv, "topic", cfg.Topic,
			"payment_gateway", cfg.GatewayURL, "merchant", cfg.MerchantURL)
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

// logAuth says at start who may call the wallet API with what.
func logAuth(cfg config, log *slog.Logger) {
	if cfg.UserTokens == nil {
		log.Info("user tokens are not configured: the service token acts for every user, so whoever holds it (a backend-for-frontend) must itself establish who its users are")
		return
	}
	log.Info("user tokens accepted: each acts for the user it names", "issuer", cfg.JWT.Issuer, "audience", cfg.JWT.Audience,
		"user_claim", cfg.JWT.UserClaim, "algorithms", strings.Join(cfg.UserTokens.Algorithms(), ","), "keys", len(cfg.UserTokens.Keys()),
		"service_token_scope", cfg.ServiceTokenScope)
	if cfg.ServiceTokenScope == ScopeAll {
		log.Warn("SERVICE_TOKEN_SCOPE=all: beside user tokens, the service token still acts for every user; whoever holds it can move any user's money")
	}
	if cfg.JWT.HMACSecret != "" {
		log.Warn("AUTH_JWT_HMAC_SECRET is set: whoever holds it can sign a token for any user; an identity provider outside this deployment should sign with a private key and give walletsvc its public key (AUTH_JWT_KEYS_FILE)")
	}
}
