package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
)

// newServer builds the notifier's HTTP server: probes, /metrics, and the API of
// internal/notify/httpapi (SMS log, gate, operator actions, page, /openapi.yaml). This is
// every route; cmd/notifier's OpenAPI test checks the document against it.
func newServer(cfg config, log *slog.Logger, pool *pgxpool.Pool, gate *httpapi.Gate,
	operator *deadletters.Operator, reg *prometheus.Registry, checks ...httpx.Check,
) *echo.Echo {
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
	httpapi.Register(e, httpapi.Deps{Log: smslog.NewStore(pool), Operator: operator, Gate: gate, Operators: cfg.Operators,
		ReadToken: cfg.ReadToken, Logger: log, RatePerSecond: float64(cfg.RatePerSecond), RateBurst: cfg.RateBurst, Refusals: refusals,
		MaxReadsInFlight: cfg.MaxReadsInFlight})
	return e
}
