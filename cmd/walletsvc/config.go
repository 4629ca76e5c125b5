package main

import (
	"io"
	"os"
	"time"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/jwtauth"
	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// config is walletsvc's whole configuration, parsed once from flags and environment.
type config struct {
	cli.Service
	SagaWorkers     int
	SagaRetryWindow time.Duration
	RelayBatch      int
	RelayLockKey    int
	// EpochCheckInterval is how often a running service checks that its database's history
	// did not rewind under it (a failover).
	EpochCheckInterval time.Duration
	// MaxSagasInFlight bounds the requests that start a saga served at once (0: unbounded).
	MaxSagasInFlight int
	// ServiceRatePerSecond limits the service token's requests a second (0: unlimited).
	ServiceRatePerSecond int
	// EpochReason is new-epoch's reason, recorded with the epoch.
	EpochReason string
	// EventVersion is the version of the balance events the sagas write (wallet.Options).
	EventVersion int
	QueueHash    string
	// ServiceToken is the bearer token of a backend trusted to act for every user (a
	// backend-for-frontend), or, under ServiceTokenScope create-user, only to create users.
	ServiceToken string
	// ServiceTokenScope is what the service token may do: ScopeAll or ScopeCreateUser.
	ServiceTokenScope string
	// JWT are the user token settings (AUTH_JWT_*); UserTokens is the verifier built from
	// them, nil when they are not configured.
	JWT        jwtConfig
	UserTokens *jwtauth.Verifier
	// GatewayURL and MerchantURL are the remote parties' base URLs (the provider contract,
	// internal/provider/openapi.yaml); each call carries its token and a timeout.
	GatewayURL      string
	GatewayToken    string
	MerchantURL     string
	MerchantToken   string
	ProviderTimeout time.Duration
	// Retention windows (0: keep forever).
	RetentionOutbox      time.Duration
	RetentionSagas       time.Duration
	RetentionIdempotency time.Duration
	RetentionOperations  time.Duration
	RetentionAudit       time.Duration
}

// jwtConfig are the settings of user tokens: JSON Web Tokens an identity provider signs,
// each naming one user (see internal/jwtauth).
type jwtConfig struct {
	Issuer     string
	Audience   string
	KeysFile   string
	HMACSecret string
	Leeway     time.Duration
	UserClaim  string
	// SourcesClaim lists the payment sources a user token's user may deposit from.
	SourcesClaim string
}

// enabled reports whether user tokens are configured: a key to verify them with is given.
func (j jwtConfig) enabled() bool { return j.KeysFile != "" || j.HMACSecret != "" }

// The values of SERVICE_TOKEN_SCOPE.
const (
	// ScopeAll: the service token acts for every user on every user-facing route (the
	// default without user tokens, where it is the only credential).
	ScopeAll = "all"
	// ScopeCreateUser: the service token only creates users; every other user-facing route
	// needs the user's own token (the default with user tokens).
	ScopeCreateUser = "create-user"
)

// DevServiceToken is SERVICE_TOKEN's default in dev (WALLETSAGA_ENV=dev), documented for the
// dev stack and the demo; production refuses it.
const DevServiceToken = "walletsaga-dev-service-token" //nolint:gosec // G101: the documented dev token, not a secret

// DevProviderURL and DevProviderToken are the gateway's and the merchant's URL and token in
// dev: the dev stack's provider simulator (cmd/providersim) and its documented token.
const (
	DevProviderURL   = "http://127.0.0.1:8082"
	DevProviderToken = "walletsaga-dev-provider-token" //nolint:gosec // G101: the simulator's documented dev token, not a secret
)

// spec is walletsvc's side of the settings the services share.
var spec = cli.ServiceSpec{
	Program: "walletsvc",
	Commands: [][2]string{
		{"serve", "serve the wallet API, run the sagas and relay the outbox (the default)"},
		{"migrate", "apply the database migrations and exit"},
		{"new-epoch", "begin a new epoch of balance events (after putting back a history the epoch check cannot see rewound) and exit"},
	},
	DatabaseEnv: "DATABASE_URL", DatabaseUsage: "PostgreSQL URL; a cluster with a standby as all its nodes, postgres://…@node1:5432,node2:5432/…?target_session_attrs=read-write, to follow a failover",
	GroupEnv: "PRODUCER_GROUP", GroupDefault: "wallet-relay", GroupUsage: "RocketMQ producer group of the outbox relay",
	// Loopback in dev (the dev stack's port), every interface in production, where the
	// process usually runs in a container behind a load balancer.
	DevHTTPAddr: "127.0.0.1:8080", HTTPAddr: ":8080", HTTPUsage: "address of the REST API",
	DevRocketMQUser: "walletsvc", Unsigned: "publish",
}

// parseConfig reads the configuration of subcommand sub (serve, migrate).
func parseConfig(sub string, args []string, getenv func(string) string, stderr io.Writer) (config, []string, error) {
	var c config
	f, err := c.Flags(spec, sub, getenv, stderr)
	if err != nil {
		return c, nil, err
	}
	serving := sub == "serve"
	f.Int(&c.MaxSagasInFlight, "MAX_SAGAS_IN_FLIGHT", 512, "requests that start a saga (deposits, purchases, withdrawals, transfers) this replica serves at once; one past it is answered 503 with Retry-After (0: unbounded)")
	f.Int(&c.ServiceRatePerSecond, "SERVICE_RATE_LIMIT", 0, "requests a second the service token may make, past which it is answered 429 with Retry-After (0: unlimited). The backend that holds it acts for every user, so RATE_LIMIT, a limit for one client, does not apply to it; MAX_SAGAS_IN_FLIGHT bounds it still")
	f.Int(&c.SagaWorkers, "SAGA_WORKERS", 16, "sagas recovered concurrently by this process (requests run their own sagas inline)")
	f.Duration(&c.SagaRetryWindow, "SAGA_RETRY_WINDOW", 10*time.Minute, "how long a saga step with an uncertain outcome is retried (same key) before it is compensated, and a compensation before an operator is needed")
	f.Int(&c.RelayBatch, "RELAY_BATCH", 256, "outbox rows the relay reads at a time for one broker queue")
	f.Int(&c.RelayLockKey, "RELAY_LOCK_KEY", 7421, "advisory lock that keeps one relay active per database")
	f.String(&c.EpochReason, "EPOCH_REASON", "", "new-epoch: why the wallet's history begins anew, in words (required there; recorded with the epoch)")
	f.Int(&c.EventVersion, "EVENT_VERSION", walletevent.Version, "version of the balance events written: 2 (each in the wallet's epoch) or 1 (none, as the previous release wrote them, which its notifier needs: set it while a notifier or a walletsvc of the previous release still runs during an upgrade, then restart without it; the notifier's protection against a restored wallet database is off for the events written so)")
	f.Duration(&c.EpochCheckInterval, "EPOCH_CHECK_INTERVAL", 5*time.Second, "how often the service checks that its database was not restored or failed over under it (it checks at start too); one that was begins a new epoch of balance events")
	f.DevString(&c.GatewayURL, "PAYMENT_GATEWAY_URL", DevProviderURL, "base URL of the payment gateway (the provider contract)")
	f.Secret(&c.GatewayToken, "PAYMENT_GATEWAY_TOKEN", DevProviderToken, "bearer token sent to the payment gateway")
	f.DevString(&c.MerchantURL, "MERCHANT_URL", DevProviderURL, "base URL of the merchant (the provider contract)")
	f.Secret(&c.MerchantToken, "MERCHANT_TOKEN", DevProviderToken, "bearer token sent to the merchant")
	f.Duration(&c.ProviderTimeout, "PROVIDER_TIMEOUT", 10*time.Second, "how long one call of the gateway or the merchant may take before its outcome counts as unknown (it is asked again, same key)")
	c.BindLate(f, spec)
	f.Secret(&c.ServiceToken, "SERVICE_TOKEN", DevServiceToken, "bearer token of a backend trusted to act for every user on the wallet API (see SERVICE_TOKEN_SCOPE)")
	f.String(&c.ServiceTokenScope, "SERVICE_TOKEN_SCOPE", "", "what the service token may do: all (act for every user) or create-user (only create users; users act with their own tokens); default: all without AUTH_JWT_*, create-user with them")
	f.String(&c.JWT.Issuer, "AUTH_JWT_ISSUER", "", "user tokens: the iss every token must carry (required with a key)")
	f.String(&c.JWT.Audience, "AUTH_JWT_AUDIENCE", "", "user tokens: a value every token's aud must contain (required with a key)")
	f.String(&c.JWT.KeysFile, "AUTH_JWT_KEYS_FILE", "", "user tokens: file of the issuer's public keys, PEM (PUBLIC KEY, CERTIFICATE) or a JWK Set (empty: none)")
	f.Secret(&c.JWT.HMACSecret, "AUTH_JWT_HMAC_SECRET", "", "user tokens: HMAC secret (HS256/384/512, at least 32 bytes) shared with one issuer you run (empty: none)")
	f.Duration(&c.JWT.Leeway, "AUTH_JWT_LEEWAY", 30*time.Second, "user tokens: clock skew allowed on exp, nbf and iat (0–2m)")
	f.String(&c.JWT.UserClaim, "AUTH_JWT_USER_CLAIM", "sub", "user tokens: the claim holding the wallet user id")
	f.String(&c.JWT.SourcesClaim, "AUTH_JWT_SOURCES_CLAIM", jwtauth.DefaultSourcesClaim, "user tokens: the claim listing the payment sources (card tokens, an array of strings) the user may deposit from, besides the default source card; any other source a user token names is 403")
	f.String(&c.QueueHash, "QUEUE_HASH", "java", "how a user id picks its broker queue: java (the Java client's SelectMessageQueueByHash, as a Java producer of the topic does) or fnv (the Go client's own hash selector)")
	f.Duration(&c.RetentionOutbox, "RETENTION_OUTBOX", retention.DefaultOutbox, "retention: how long a published outbox row is kept after its publication (0: forever; an unpublished one is never pruned)")
	f.Duration(&c.RetentionSagas, "RETENTION_SAGAS", retention.DefaultSagas, "retention: how long a finished saga (completed, compensated, failed, resolved) and its step history are kept (0: forever; at least RETENTION_IDEMPOTENCY)")
	f.Duration(&c.RetentionIdempotency, "RETENTION_IDEMPOTENCY", retention.DefaultIdempotency, "retention: how long an Idempotency-Key is remembered (24h–720h; a key reused later starts a new request)")
	f.Duration(&c.RetentionOperations, "RETENTION_OPERATIONS", retention.DefaultOperations, "retention: how long the wallet's row of a pruned saga is kept after its saga was pruned, answering 410 gone for the saga's id (0: forever; after it, 404)")
	f.Duration(&c.RetentionAudit, "RETENTION_AUDIT", retention.DefaultAudit, "retention: how long an operator audit row is kept (0: forever; never while its saga is kept)")
	f.RetentionFlags(&c.RetentionBatch, &c.RetentionPause)
	if err := f.Parse(args); err != nil {
		return c, nil, err
	}
	p := f.Problems()
	c.validate(p, serving)
	if serving {
		// Like the tokens, only serving needs them: migrate runs where no keys file may be.
		c.userTokens(p)
	}
	return c, f.FlagSet().Args(), f.Err()
}

// validate adds c's problems to p; the tokens matter only when serving.
func (c config) validate(p *cli.Problems, serving bool) {
	c.CheckEarly(p, spec)
	if c.MaxSagasInFlight < 0 {
		p.Addf("MAX_SAGAS_IN_FLIGHT", "must not be negative, got %d", c.MaxSagasInFlight)
	}
	if c.ServiceRatePerSecond < 0 {
		p.Addf("SERVICE_RATE_LIMIT", "must not be negative, got %d", c.ServiceRatePerSecond)
	}
	if c.SagaWorkers < 1 || c.SagaWorkers > 1024 {
		p.Addf("SAGA_WORKERS", "must be 1–1024, got %d", c.SagaWorkers)
	}
	if c.SagaRetryWindow < time.Second {
		p.Addf("SAGA_RETRY_WINDOW", "must be at least 1s, got %s", c.SagaRetryWindow)
	}
	if c.RelayBatch < 1 || c.RelayBatch > 10000 {
		p.Addf("RELAY_BATCH", "must be 1–10000, got %d", c.RelayBatch)
	}
	if c.EventVersion != 1 && c.EventVersion != walletevent.Version {
		p.Addf("EVENT_VERSION", "must be 1 or %d, got %d", walletevent.Version, c.EventVersion)
	}
	if c.EpochCheckInterval < 100*time.Millisecond || c.EpochCheckInterval > 5*time.Minute {
		p.Addf("EPOCH_CHECK_INTERVAL", "must be 100ms–5m, got %s", c.EpochCheckInterval)
	}
	if c.QueueHash != "java" && c.QueueHash != "fnv" {
		p.Addf("QUEUE_HASH", "must be java or fnv, got %q", c.QueueHash)
	}
	p.CheckServiceURL(c.Mode, "PAYMENT_GATEWAY_URL", c.GatewayURL)
	p.CheckServiceURL(c.Mode, "MERCHANT_URL", c.MerchantURL)
	p.CheckToken(c.Mode, "PAYMENT_GATEWAY_TOKEN", c.GatewayToken, serving)
	p.CheckToken(c.Mode, "MERCHANT_TOKEN", c.MerchantToken, serving)
	if c.ProviderTimeout < 100*time.Millisecond || c.ProviderTimeout > 5*time.Minute {
		p.Addf("PROVIDER_TIMEOUT", "must be 100ms–5m, got %s", c.ProviderTimeout)
	}
	p.CheckToken(c.Mode, "SERVICE_TOKEN", c.ServiceToken, serving)
	// Every secret walletsvc takes (from callers) or presents (to the providers, the broker
	// and the database) is another's; no two may be the same, nor an operator's token.
	c.CheckLate(p, spec, serving,
		cli.NamedSecret{Field: "SERVICE_TOKEN", Value: c.ServiceToken},
		cli.NamedSecret{Field: "AUTH_JWT_HMAC_SECRET", Value: c.JWT.HMACSecret},
		cli.NamedSecret{Field: "PAYMENT_GATEWAY_TOKEN", Value: c.GatewayToken},
		cli.NamedSecret{Field: "MERCHANT_TOKEN", Value: c.MerchantToken},
	)
	p.CheckRetention(c.Mode, c.RetentionBatch, c.RetentionPause,
		map[string]time.Duration{"RETENTION_OUTBOX": c.RetentionOutbox, "RETENTION_SAGAS": c.RetentionSagas, "RETENTION_IDEMPOTENCY": c.RetentionIdempotency,
			"RETENTION_OPERATIONS": c.RetentionOperations, "RETENTION_AUDIT": c.RetentionAudit},
		map[string]retention.Bounds{"RETENTION_OUTBOX": retention.OutboxBounds, "RETENTION_SAGAS": retention.SagaBounds, "RETENTION_IDEMPOTENCY": retention.IdempotencyBounds,
			"RETENTION_OPERATIONS": retention.OperationBounds, "RETENTION_AUDIT": retention.AuditBounds})
	if msg := retention.CheckSagasOutliveKeys(c.RetentionSagas, c.RetentionIdempotency); msg != "" {
		p.Addf("RETENTION_SAGAS", "%s", msg)
	}
}

// userTokens validates the user token settings and, when they are configured and sound,
// builds c.UserTokens; it settles SERVICE_TOKEN_SCOPE's default.
func (c *config) userTokens(p *cli.Problems) {
	j := c.JWT
	if c.ServiceTokenScope == "" {
		c.ServiceTokenScope = ScopeAll
		if j.enabled() {
			c.ServiceTokenScope = ScopeCreateUser
		}
	}
	switch {
	case c.ServiceTokenScope != ScopeAll && c.ServiceTokenScope != ScopeCreateUser:
		p.Addf("SERVICE_TOKEN_SCOPE", "must be %s or %s, got %q", ScopeAll, ScopeCreateUser, c.ServiceTokenScope)
	case c.ServiceTokenScope == ScopeCreateUser && !j.enabled():
		p.Addf("SERVICE_TOKEN_SCOPE", "%s needs user tokens (AUTH_JWT_KEYS_FILE or AUTH_JWT_HMAC_SECRET): without them no one could act for a user", ScopeCreateUser)
	}
	if !j.enabled() {
		for _, s := range [][2]string{{"AUTH_JWT_ISSUER", j.Issuer}, {"AUTH_JWT_AUDIENCE", j.Audience}} {
			if s[1] != "" {
				p.Addf(s[0], "is set, but no key to verify user tokens with is: set AUTH_JWT_KEYS_FILE or AUTH_JWT_HMAC_SECRET (or leave it out)")
			}
		}
		return
	}
	before := len(*p)
	if j.Issuer == "" {
		p.Addf("AUTH_JWT_ISSUER", "required with user tokens: the iss every token must carry")
	}
	if j.Audience == "" {
		p.Addf("AUTH_JWT_AUDIENCE", "required with user tokens: the aud that says a token is meant for this service")
	}
	if j.UserClaim == "" {
		p.Addf("AUTH_JWT_USER_CLAIM", "must name a claim (sub by default)")
	}
	switch j.SourcesClaim {
	case "":
		p.Addf("AUTH_JWT_SOURCES_CLAIM", "must name a claim (%s by default)", jwtauth.DefaultSourcesClaim)
	case j.UserClaim:
		p.Addf("AUTH_JWT_SOURCES_CLAIM", "must name another claim than AUTH_JWT_USER_CLAIM (both are %q)", j.UserClaim)
	}
	if j.Leeway < 0 || j.Leeway > jwtauth.MaxLeeway {
		p.Addf("AUTH_JWT_LEEWAY", "must be 0–%s, got %s", jwtauth.MaxLeeway, j.Leeway)
	}
	if j.HMACSecret != "" {
		if len(j.HMACSecret) < jwtauth.MinHMACSecretLen {
			p.Addf("AUTH_JWT_HMAC_SECRET", "must be at least %d bytes (256 bits), got %d", jwtauth.MinHMACSecretLen, len(j.HMACSecret))
		} else {
			p.CheckToken(c.Mode, "AUTH_JWT_HMAC_SECRET", j.HMACSecret, false) // documented, predictable; validate checks it differs from the others
		}
	}
	var keys []byte
	if j.KeysFile != "" {
		var err error
		if keys, err = os.ReadFile(j.KeysFile); err != nil {
			p.Addf("AUTH_JWT_KEYS_FILE", "%v", err)
		} else if _, err := jwtauth.ParseKeys(keys); err != nil {
			p.Addf("AUTH_JWT_KEYS_FILE", "%s: %v", j.KeysFile, err)
		}
	}
	if len(*p) > before {
		return
	}
	v, err := jwtauth.New(jwtauth.Settings{
		Issuer: j.Issuer, Audience: j.Audience, HMACSecret: []byte(j.HMACSecret), Keys: keys, Leeway: j.Leeway, UserClaim: j.UserClaim,
		SourcesClaim: j.SourcesClaim,
	})
	if err != nil {
		p.Addf("AUTH_JWT", "%v", err)
		return
	}
	c.UserTokens = v
}
