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
	httpx.Probes(e, checks...)
	httpx.Handler(e, "/metrics", metrics.Handler(reg, log))
	httpapi.Register(e, svc, httpapi.Options{ServiceToken: cfg.ServiceToken, AdminToken: cfg.AdminToken, Logger: log})
	return e
}
