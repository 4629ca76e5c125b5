package main

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

// newServer builds walletsvc's HTTP server: probes, /metrics, and the wallet API of
// internal/wallet/httpapi (with /openapi.yaml). This is every route; the OpenAPI test checks
// the document against it.
func newServer(cfg config, log *slog.Logger, svc *wallet.Service, reg *prometheus.Registry, checks ...httpx.Check) *echo.Echo {
	e := httpx.New(httpx.Options{Logger: log})
	refusals := &httpx.Refusals{Hold: httpx.RefusalHold}
	e.Use(httpx.HoldFailedAuth(refusals))
	metrics.NewRefusals(reg, refusals)
	// Probes and scrapes within a rate of their own (httpx.ProbeRate): a client with the
	// metrics token is one client, any other its address.
	limit := httpx.PerClient(httpx.ProbeRate(float64(cfg.RatePerSecond)), httpx.ProbeBurst, refusals,
		func(token string) bool { return httpx.TokenIs(token, cfg.MetricsToken) })
	httpx.Probes(e, log, limit, checks...)
	httpx.Metrics(e, metrics.Handler(reg, log), cfg.MetricsToken, limit)
	opts := httpapi.Options{
		ServiceToken: cfg.ServiceToken, ServiceTokenCreatesUsersOnly: cfg.ServiceTokenScope == ScopeCreateUser,
		Operators: cfg.Operators, Logger: log,
		MaxSagasInFlight: cfg.MaxSagasInFlight, RatePerSecond: float64(cfg.RatePerSecond), RateBurst: cfg.RateBurst, Refusals: refusals,
		ServiceRatePerSecond: float64(cfg.ServiceRatePerSecond),
	}
	if cfg.UserTokens != nil {
		// Not a nil *Verifier in the interface: without user tokens the field stays nil.
		opts.UserTokens = cfg.UserTokens
	}
	httpapi.Register(e, svc, opts)
	return e
}
