// Service: the settings walletsvc and the notifier share, bound and checked in one place.

package cli

import (
	"io"
	"slices"
	"time"

	"github.com/walletsaga/walletsaga/internal/httpx"
)

// Service is the configuration both services share: the database, the broker, the HTTP
// server, the logger, shutdown, the pool's timeouts and the pruner's pace.
type Service struct {
	// Mode is production unless WALLETSAGA_ENV=dev.
	Mode            Mode
	DatabaseURL     string
	Namesrv         string
	Topic           string
	Group           string // the RocketMQ group: walletsvc's producer group, the notifier's consumer group
	HTTPAddr        string
	AddrFile        string
	MigrateOnStart  bool
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration
	// UnsafeDurability is the operator's reason to run on a Postgres that can lose commits
	// (empty: refused in production).
	UnsafeDurability string
	// UnverifiedDatabaseTLS is the operator's reason to reach a database over the network
	// with sslmode=require or verify-ca, which do not verify the server (empty: production
	// needs sslmode=verify-full).
	UnverifiedDatabaseTLS string
	// RocketMQAccessKey and RocketMQSecretKey are the RocketMQ user this process signs its
	// requests as (the broker's access control); empty: unsigned, which production refuses
	// unless UnsignedBroker states the network boundary that replaces access control.
	RocketMQAccessKey string
	RocketMQSecretKey string
	UnsignedBroker    string
	// StatementTimeout and IdleInTxTimeout are set on every connection of the pool.
	StatementTimeout time.Duration
	IdleInTxTimeout  time.Duration
	// RatePerSecond and RateBurst limit each client of the API (its bearer token, else its
	// address) to so many requests a second (0: unlimited).
	RatePerSecond int
	RateBurst     int
	// MetricsToken is the bearer token /metrics requires (empty: open, which production
	// refuses): the metrics show business volumes and the build, to Prometheus only.
	MetricsToken string
	// The pruner's pace (internal/retention); each service has its own windows.
	RetentionBatch int
	RetentionPause time.Duration
	// Operators may call the service's operator endpoints, each with a token of their own
	// (OPERATOR_TOKENS or OPERATOR_TOKENS_FILE); none disables them.
	Operators httpx.Operators
	operators operatorSettings
}

// ServiceSpec is what differs between the services in the settings they share.
type ServiceSpec struct {
	// Program is the binary's name; Commands its subcommands, the first of which serves
	// (the others need only the database).
	Program  string
	Commands [][2]string
	// DatabaseEnv names the database URL's setting, DatabaseFallback the one it falls back
	// to ("" for none), DatabaseUsage says what it is.
	DatabaseEnv, DatabaseFallback, DatabaseUsage string
	// GroupEnv, GroupDefault and GroupUsage bind Service.Group.
	GroupEnv, GroupDefault, GroupUsage string
	// DevHTTPAddr and HTTPAddr are HTTP_ADDR's defaults in dev and in production;
	// HTTPUsage says what it serves.
	DevHTTPAddr, HTTPAddr, HTTPUsage string
	// DevRocketMQUser is the dev broker's user the binary signs as in dev (see
	// DevRocketMQSecret); Unsigned is what production refuses to do unsigned.
	DevRocketMQUser, Unsigned string
}

// Flags reads the mode into s.Mode and returns the flags of subcommand sub, with the
// settings the services share that come first bound (BindLate binds the others).
func (s *Service) Flags(spec ServiceSpec, sub string, getenv func(string) string, stderr io.Writer) (*Flags, error) {
	mode, err := ModeFrom(getenv)
	if err != nil {
		return nil, err
	}
	s.Mode = mode
	f := NewFlags(spec.Program+" "+sub, mode, getenv, stderr, spec.Commands...)
	if sub != spec.Commands[0][0] {
		f.OnlyRequire(spec.DatabaseEnv)
	}
	f.DatabaseURL(&s.DatabaseURL, spec.DatabaseEnv, spec.DatabaseFallback, DevDatabaseURL, true, spec.DatabaseUsage)
	f.DevString(&s.Namesrv, "ROCKETMQ_NAMESRV", DevNamesrv, "RocketMQ name server addresses, comma-separated")
	f.String(&s.Topic, "WALLET_EVENTS_TOPIC", "wallet-events", "topic of balance events")
	f.String(&s.Group, spec.GroupEnv, spec.GroupDefault, spec.GroupUsage)
	f.String(&s.HTTPAddr, "HTTP_ADDR", map[Mode]string{Dev: spec.DevHTTPAddr, Production: spec.HTTPAddr}[mode], spec.HTTPUsage)
	f.String(&s.AddrFile, "HTTP_ADDR_FILE", "", "file the address HTTP_ADDR bound is written to once it listens, for whoever started the process with port 0 (empty: none)")
	f.Bool(&s.MigrateOnStart, "MIGRATE_ON_START", true, "apply database migrations at start")
	f.Int(&s.RatePerSecond, "RATE_LIMIT", map[Mode]int{Dev: 0, Production: 100}[mode], "requests a second each client of the API may make (its valid bearer token, else its address), past which it is answered 429 with Retry-After (0: unlimited)")
	f.Int(&s.RateBurst, "RATE_BURST", 200, "requests a client may make at once above RATE_LIMIT, before it is held to the rate")
	// Text on a developer's terminal, JSON for a log collector.
	f.String(&s.LogFormat, "LOG_FORMAT", map[Mode]string{Dev: "text", Production: "json"}[mode], "log format: text or json")
	f.String(&s.LogLevel, "LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.Duration(&s.ShutdownTimeout, "SHUTDOWN_TIMEOUT", 15*time.Second, "how long a graceful shutdown may take")
	return f, nil
}

// BindLate binds the shared settings that come after the service's own: the operators, the
// pool's timeouts, the broker's credentials, the durability override and the database TLS
// override. In dev, the dev user gets its documented secret when none is given, never
// another user.
func (s *Service) BindLate(f *Flags, spec ServiceSpec) {
	s.bindOperators(f)
	f.Duration(&s.StatementTimeout, "PG_STATEMENT_TIMEOUT", 30*time.Second, "longest one SQL statement may run before Postgres cuts it off (a statement waiting behind a stalled peer's lock gives its connection back); 0 keeps the server's")
	f.Duration(&s.IdleInTxTimeout, "PG_IDLE_IN_TX_TIMEOUT", 30*time.Second, "longest a session may sit idle inside a transaction before Postgres ends it and releases its locks; 0 keeps the server's")
	f.DevOptional(&s.RocketMQAccessKey, "ROCKETMQ_ACCESS_KEY", spec.DevRocketMQUser, "RocketMQ user this process signs its requests as (the broker's access control; required in production unless ALLOW_UNSIGNED_BROKER)")
	f.Secret(&s.RocketMQSecretKey, "ROCKETMQ_SECRET_KEY", "", "secret key (password) of ROCKETMQ_ACCESS_KEY (in dev, for the dev user: its documented secret)")
	f.String(&s.UnsignedBroker, UnsignedBrokerEnv, "", "the network boundary that keeps everyone else off a broker without access control, in words: production then starts without ROCKETMQ_ACCESS_KEY, and logs it (empty: production refuses to "+spec.Unsigned+" unsigned)")
	f.Secret(&s.MetricsToken, "METRICS_TOKEN", "", "bearer token GET /metrics requires (Prometheus's authorization credentials); required in production, where the metrics are private (empty in dev: open)")
	f.String(&s.UnsafeDurability, "ALLOW_UNSAFE_DURABILITY", "", "the reason to run on a Postgres whose commits can vanish in a crash (fsync off, synchronous_commit off or local); empty: production refuses such a server")
	f.String(&s.UnverifiedDatabaseTLS, UnverifiedDatabaseTLSEnv, "", "the reason to reach a database over the network with sslmode=require or verify-ca, which do not verify the server (require checks no certificate, verify-ca not the name in it): production then starts, and says so at every start; empty: production needs sslmode=verify-full there")
	f.after = append(f.after, func() {
		if f.mode == Dev && s.RocketMQAccessKey == spec.DevRocketMQUser && s.RocketMQSecretKey == "" {
			s.RocketMQSecretKey = DevRocketMQSecret(spec.DevRocketMQUser)
		}
	})
}

// CheckEarly adds the problems of the shared settings bound by Flags to p.
func (s Service) CheckEarly(p *Problems, spec ServiceSpec) {
	p.CheckPostgresURL(s.Mode, spec.DatabaseEnv, s.DatabaseURL, s.UnverifiedDatabaseTLS)
	p.CheckHostPort("ROCKETMQ_NAMESRV", s.Namesrv, true)
	p.CheckName("WALLET_EVENTS_TOPIC", s.Topic)
	p.CheckName(spec.GroupEnv, s.Group)
	p.CheckHostPort("HTTP_ADDR", s.HTTPAddr, false)
	p.CheckLog(s.LogFormat, s.LogLevel)
	if s.ShutdownTimeout <= 0 {
		p.Addf("SHUTDOWN_TIMEOUT", "must be positive, got %s", s.ShutdownTimeout)
	}
	if s.RatePerSecond < 0 {
		p.Addf("RATE_LIMIT", "must not be negative, got %d", s.RatePerSecond)
	}
	if s.RateBurst < 1 {
		p.Addf("RATE_BURST", "must be at least 1, got %d", s.RateBurst)
	}
}

// CheckLate adds the problems of the shared settings bound by BindLate to p. secrets are
// the service's own; each of them, the broker's secret and the database's password must
// differ from the others, and from every operator's token.
func (s Service) CheckLate(p *Problems, spec ServiceSpec, serving bool, secrets ...NamedSecret) {
	p.CheckToken(s.Mode, "METRICS_TOKEN", s.MetricsToken, serving && s.Mode == Production)
	all := slices.Concat(secrets, []NamedSecret{
		{Field: "METRICS_TOKEN", Value: s.MetricsToken},
		{Field: "ROCKETMQ_SECRET_KEY", Value: s.RocketMQSecretKey},
		{Field: spec.DatabaseEnv + "'s password", Value: URLPassword(s.DatabaseURL)},
	})
	p.CheckDistinct(s.Mode, all...)
	s.checkOperators(p, serving, all)
	if s.StatementTimeout < 0 {
		p.Addf("PG_STATEMENT_TIMEOUT", "must not be negative, got %s", s.StatementTimeout)
	}
	if s.IdleInTxTimeout < 0 {
		p.Addf("PG_IDLE_IN_TX_TIMEOUT", "must not be negative, got %s", s.IdleInTxTimeout)
	}
	p.CheckBroker(s.Mode, serving, s.RocketMQAccessKey, s.RocketMQSecretKey, s.UnsignedBroker)
	p.CheckOverride("ALLOW_UNSAFE_DURABILITY", s.UnsafeDurability)
	p.CheckOverride(UnverifiedDatabaseTLSEnv, s.UnverifiedDatabaseTLS)
}
