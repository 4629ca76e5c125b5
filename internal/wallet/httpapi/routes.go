// Package httpapi is the wallet's REST API on echo: JSON in and out, errors as
// {"error":{"code","message"}} through apperr's one code→status table (see httpx).
//
// Authentication: the user-facing routes need the service token (Authorization: Bearer
// <SERVICE_TOKEN>); the operator routes need the admin token and an X-Operator header (see
// httpx.Operator). /openapi.yaml, like the probes and /metrics the binary adds, is open.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// OpenAPI is the OpenAPI 3 description of every route walletsvc serves, served at
// /openapi.yaml. cmd/walletsvc's test checks it against the routes actually registered.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Options configure Register.
type Options struct {
	// ServiceToken is the bearer token the user-facing routes require. Empty refuses them
	// all (403): the API never runs open by accident.
	ServiceToken string
	// AdminToken is the bearer token of the operator routes. Empty disables them (403).
	AdminToken string
	Logger     *slog.Logger // slog.Default() when nil
}

// Register adds every route of the wallet API to e. This is the one list of them.
func Register(e *echo.Echo, svc *wallet.Service, opts Options) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	service := httpx.RequireBearer("service", "the wallet API is disabled: no service token is configured", opts.ServiceToken)
	routes := []struct {
		method, path string
		handler      echo.HandlerFunc
		mw           []echo.MiddlewareFunc
	}{
		{http.MethodPost, "/v1/users", createUser(svc), []echo.MiddlewareFunc{service}},
		{http.MethodGet, "/v1/users/:id/wallet", getWallet(svc), []echo.MiddlewareFunc{service}},
		{http.MethodGet, "/v1/users/:id/events", listEvents(svc), []echo.MiddlewareFunc{service}},
		{http.MethodPost, "/v1/users/:id/deposits", deposit(svc), []echo.MiddlewareFunc{service}},
		{http.MethodPost, "/v1/users/:id/purchases", purchase(svc), []echo.MiddlewareFunc{service}},
		{http.MethodPost, "/v1/users/:id/withdrawals", withdraw(svc), []echo.MiddlewareFunc{service}},
		{http.MethodPost, "/v1/transfers", transfer(svc), []echo.MiddlewareFunc{service}},
		{http.MethodGet, "/v1/sagas", listSagas(svc), []echo.MiddlewareFunc{service}},
		{http.MethodGet, "/v1/sagas/:id", getSaga(svc), []echo.MiddlewareFunc{service}},
		// Operator actions: admin token + X-Operator, checked in the handler.
		{http.MethodPost, "/v1/sagas/:id/retry", operatorAction(opts.AdminToken, svc.RetrySaga), nil},
		{http.MethodPost, "/v1/sagas/:id/resolve", operatorAction(opts.AdminToken, svc.ResolveSaga), nil},
		{http.MethodGet, "/v1/sagas/:id/audit", sagaAudit(svc, opts.AdminToken), nil},
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler, r.mw...)
	}
	httpx.Document(e, "/openapi.yaml", "application/yaml", OpenAPI)
}
