// What both services build the same way from Service: pool, migrations, broker watch, server, pruner, tracing.

package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/telemetry"
)

// Traced sets up tracing for service (telemetry.Setup), runs serve, and flushes the spans
// it recorded once serve returns.
func Traced(ctx context.Context, service string, getenv func(string) string, log *slog.Logger, serve func() error) error {
	shutdown, err := telemetry.Setup(ctx, service, getenv)
	if err != nil {
		return err
	}
	defer telemetry.Flush(shutdown, log)
	return serve()
}

// OpenPool opens a service's pool of maxConns connections, every one under the statement
// and idle-in-transaction timeouts, reading through indexes with plans made once
// (pg.Options.IndexedReads, GenericPlans), and checks that the database keeps what it
// acknowledges (OpenDurablePool).
func (s Service) OpenPool(ctx context.Context, log *slog.Logger, maxConns int32) (*pgxpool.Pool, error) {
	return OpenDurablePool(ctx, s.Mode, log, s.DatabaseURL, pg.Options{
		MaxConns: maxConns, StatementTimeout: s.StatementTimeout, IdleInTxTimeout: s.IdleInTxTimeout,
		ConnectionCheck: pg.ConnectionCheck, IndexedReads: true, GenericPlans: true,
	}, s.UnsafeDurability)
}

// Migrate applies a service's migrations (migrate, e.g. migrations.Wallet.Migrate) on a
// pool of its own, without the statement timeout: a migration may rewrite a large table.
// done is what the log says once it is done.
func (s Service) Migrate(ctx context.Context, log *slog.Logger, done string, migrate func(context.Context, *pgxpool.Pool, *slog.Logger) (int64, error)) error {
	pool, err := pg.Open(ctx, s.DatabaseURL, pg.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	v, err := migrate(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info(done, "version", v)
	return nil
}

// Closers are the clients a service opened, to close once everything stopped.
type Closers []func()

// Close closes them, in reverse.
func (c Closers) Close() {
	for _, fn := range slices.Backward(c) {
		fn()
	}
}

// Broker returns s's name servers (their host names resolved, see ResolveNamesrv),
// credentials, and a watch of whether the topic's route can be read, whose route check it
// adds to closers.
func (s Service) Broker(ctx context.Context, closers *Closers) ([]string, ordering.Credentials, *ordering.BrokerWatch, error) {
	namesrv, err := ResolveNamesrv(ctx, SplitList(s.Namesrv))
	if err != nil {
		return nil, ordering.Credentials{}, nil, err
	}
	creds := ordering.Credentials{AccessKey: s.RocketMQAccessKey, SecretKey: s.RocketMQSecretKey}
	route := ordering.NewRouteCheck(namesrv, s.Topic, creds)
	*closers = append(*closers, func() { _ = route.Close() })
	return namesrv, creds, ordering.NewBrokerWatch(route, 0), nil
}

// ResolveNamesrv returns the name server addresses (host:port) with each host name replaced
// by its first address, IPv4 first: the RocketMQ client takes IP addresses only ("IP addr
// error"), and a name server is often known by name (the compose stack's namesrv:9876). A
// name is resolved once, at start.
func ResolveNamesrv(ctx context.Context, addrs []string) ([]string, error) {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("ROCKETMQ_NAMESRV %q: %w", a, err)
		}
		if net.ParseIP(host) != nil {
			out = append(out, a)
			continue
		}
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("ROCKETMQ_NAMESRV: resolving %s: %w", host, err)
		}
		ip := ips[0]
		if i := slices.IndexFunc(ips, func(ip net.IP) bool { return ip.To4() != nil }); i >= 0 {
			ip = ips[i]
		}
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out, nil
}

// NewServer returns a server of h on addr that, once it listens, logs listening with attrs
// and writes the address it bound to addrFile (HTTP_ADDR_FILE).
func NewServer(addr, addrFile string, h http.Handler, log *slog.Logger, listening string, attrs ...any) *httpx.Server {
	return httpx.NewServer(addr, h, log, func(a net.Addr) {
		log.Info(listening, append([]any{"addr", a.String()}, attrs...)...)
		if err := WriteAddrFile(addrFile, a); err != nil {
			log.Error("cannot tell the address bound", "err", err)
		}
	})
}

// NewPruner returns a service's pruner of tables at s's pace, observed in reg. Every replica
// runs one; their batches skip each other's locked rows.
func (s Service) NewPruner(log *slog.Logger, reg prometheus.Registerer, tables ...retention.Table) (*retention.Pruner, error) {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name
	}
	return retention.New(retention.Config{Batch: s.RetentionBatch, Pause: s.RetentionPause,
		Logger: log.With("component", "retention"), Observer: metrics.NewRetention(reg, names...)}, tables...)
}

// LogStart says at start what a service's settings leave open: dev mode (and what it
// accepts, devAccepts), how it reaches the broker (LogBroker), and who may call its operator
// endpoints (operations): the operators by name, or, without any, that they are disabled.
func (s Service) LogStart(log *slog.Logger, devAccepts, operations string) {
	if s.Mode == Dev {
		log.Warn("running in dev mode (WALLETSAGA_ENV=dev): " + devAccepts)
	}
	LogBroker(log, s.Mode, s.RocketMQAccessKey, s.UnsignedBroker)
	if s.Operators.Len() == 0 {
		log.Info(OperatorTokensFileEnv + " is not set: the operator endpoints (" + operations + ") are disabled")
		return
	}
	log.Info("the operator endpoints ("+operations+") take these operators' tokens, each recorded by name as who acted", "operators", s.Operators.Names())
}
