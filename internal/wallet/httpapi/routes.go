// Package httpapi is the wallet's REST API on echo: JSON in and out, errors as
// {"error":{"code","message"}} through apperr's one code→status table (see httpx).
//
// Authentication: the user-facing routes take the service token (Authorization: Bearer
// <SERVICE_TOKEN>), a backend trusted to act for every user; with user tokens configured
// (Options.UserTokens), also a token that names one user, which acts for that user only (see
// authorize). The operator routes need the admin token and an X-Operator header (see
// httpx.Operator). /openapi.yaml, like the probes and /metrics the binary adds, is open.
package httpapi

import (
	_ "embed"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/wallet"
	"github.com/walletsaga/walletsaga/internal/wallet/web"
)

// OpenAPI is the OpenAPI 3 description of every route walletsvc serves, served at
// /openapi.yaml. cmd/walletsvc's test checks it against the routes actually registered.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Options configure Register.
type Options struct {
	// ServiceToken is the bearer token of a backend trusted to act for every user on the
	// user-facing routes. Empty, with no UserTokens either, refuses them all (403): the API
	// never runs open by accident.
	ServiceToken string
	// ServiceTokenCreatesUsersOnly confines the service token to creating users: every
	// other user-facing route then needs the user's own token (UserTokens).
	ServiceTokenCreatesUsersOnly bool
	// UserTokens, when not nil, verifies bearer tokens that name one user; such a token acts
	// for that user only, and never creates users.
	UserTokens UserTokens
	// AdminToken is the bearer token of the operator routes. Empty disables them (403).
	AdminToken string
	Logger     *slog.Logger // slog.Default() when nil
}

// Register adds every route of the wallet API to e. This is the one list of them.
func Register(e *echo.Echo, svc *wallet.Service, opts Options) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	users := authenticator{serviceToken: opts.ServiceToken, serviceOnly: opts.ServiceTokenCreatesUsersOnly, users: opts.UserTokens}
	page, asset := httpx.Page(web.FS)
	routes := []struct {
		method, path string
		handler      echo.HandlerFunc
	}{
		// User-facing: who calls is established before the handler runs, which authorizes
		// the request once it knows whose it is.
		{http.MethodPost, "/v1/users", users.route(createUser(svc))},
		{http.MethodGet, "/v1/users/:id/wallet", users.route(getWallet(svc))},
		{http.MethodGet, "/v1/users/:id/events", users.route(listEvents(svc))},
		{http.MethodPost, "/v1/users/:id/deposits", users.route(deposit(svc))},
		{http.MethodPost, "/v1/users/:id/purchases", users.route(purchase(svc))},
		{http.MethodPost, "/v1/users/:id/withdrawals", users.route(withdraw(svc))},
		{http.MethodPost, "/v1/transfers", users.route(transfer(svc))},
		{http.MethodGet, "/v1/sagas", users.route(listSagas(svc))},
		{http.MethodGet, "/v1/sagas/:id", users.route(getSaga(svc))},
		// Operator actions: admin token + X-Operator, checked in the handler.
		{http.MethodPost, "/v1/sagas/:id/retry", operatorAction(opts.AdminToken, svc.RetrySaga)},
		{http.MethodPost, "/v1/sagas/:id/resolve", operatorAction(opts.AdminToken, svc.ResolveSaga)},
		{http.MethodGet, "/v1/sagas/:id/audit", sagaAudit(svc, opts.AdminToken)},
		{http.MethodGet, "/v1/operator/sagas", operatorSagas(svc, opts.AdminToken)},
		{http.MethodGet, "/v1/operator/sagas/:id", operatorSaga(svc, opts.AdminToken)},
		// The operator console: open, it holds no data and asks for the admin token.
		{http.MethodGet, "/", page},
		{http.MethodGet, "/assets/:name", asset},
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler)
	}
	httpx.Document(e, "/openapi.yaml", "application/yaml", OpenAPI)
}
