// Package httpapi is the wallet's REST API on echo: JSON in and out, errors as
// {"error":{"code","message"}} through apperr's one code→status table (see httpx).
//
// Authentication: the user-facing routes take the service token (Authorization: Bearer
// <SERVICE_TOKEN>), a backend trusted to act for every user; with user tokens configured
// (Options.UserTokens), also a token that names one user, which acts for that user only (see
// authorize). The operator routes need an operator's own token, which names who acts (see
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
	// Operators may call the operator routes, each with their own bearer token, which names
	// the actor of the audit rows. None disables the routes (403).
	Operators httpx.Operators
	Logger    *slog.Logger // slog.Default() when nil
	// MaxSagasInFlight bounds the requests that start a saga (deposits, purchases,
	// withdrawals, transfers) served at once by this replica: one past it is 503 with
	// Retry-After (0: unbounded).
	MaxSagasInFlight int
	// RatePerSecond and RateBurst limit each client of the user-facing routes (its valid
	// bearer token, else its address) to so many requests a second: one past it is 429 with
	// Retry-After (0: unlimited).
	RatePerSecond float64
	RateBurst     int
	// ServiceRatePerSecond limits the service token's requests a second the same way, in
	// bursts of RateBurst (0: unlimited): the backend that holds it acts for every user, so
	// RatePerSecond, a limit for one client, does not apply to it.
	ServiceRatePerSecond float64
	// Refusals counts the requests refused by either (nil: counted nowhere).
	Refusals *httpx.Refusals
}

// Register adds every route of the wallet API to e. This is the one list of them.
func Register(e *echo.Echo, svc *wallet.Service, opts Options) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Refusals == nil {
		opts.Refusals = &httpx.Refusals{}
	}
	users := authenticator{serviceToken: opts.ServiceToken, serviceOnly: opts.ServiceTokenCreatesUsersOnly, users: opts.UserTokens}
	page, asset := httpx.Page(web.FS)
	// Admission (internal/httpx): every user-facing route within its client's rate, and the
	// routes that start a saga within the replica's bound on them in flight as well.
	rated := []echo.MiddlewareFunc{httpx.ByCredential(users.isService,
		httpx.PerClient(opts.ServiceRatePerSecond, opts.RateBurst, opts.Refusals, users.isService),
		httpx.PerClient(opts.RatePerSecond, opts.RateBurst, opts.Refusals, users.validUser))}
	// A saga's slot is taken once the caller is known (users.route): a request with a token
	// that does not verify is refused without taking one.
	inFlight := httpx.InFlight(opts.MaxSagasInFlight, opts.Refusals)
	routes := []struct {
		method, path string
		handler      echo.HandlerFunc
		mw           []echo.MiddlewareFunc
	}{
		// User-facing: who calls is established before the handler runs, which authorizes
		// the request once it knows whose it is.
		{http.MethodPost, "/v1/users", users.route(createUser(svc)), rated},
		{http.MethodGet, "/v1/users/:id/wallet", users.route(getWallet(svc)), rated},
		{http.MethodGet, "/v1/users/:id/events", users.route(listEvents(svc)), rated},
		{http.MethodPost, "/v1/users/:id/deposits", users.route(deposit(svc), inFlight), rated},
		{http.MethodPost, "/v1/users/:id/purchases", users.route(purchase(svc), inFlight), rated},
		{http.MethodPost, "/v1/users/:id/withdrawals", users.route(withdraw(svc), inFlight), rated},
		{http.MethodPost, "/v1/transfers", users.route(transfer(svc), inFlight), rated},
		{http.MethodGet, "/v1/sagas", users.route(listSagas(svc)), rated},
		{http.MethodGet, "/v1/sagas/:id", users.route(getSaga(svc)), rated},
		// Operator routes: an operator's token, which names who acts, checked in the handler.
		{http.MethodPost, "/v1/sagas/:id/retry", operatorAction(opts.Operators, svc.RetrySaga), nil},
		{http.MethodPost, "/v1/sagas/:id/resolve", operatorAction(opts.Operators, svc.ResolveSaga), nil},
		{http.MethodGet, "/v1/sagas/:id/audit", sagaAudit(svc, opts.Operators), nil},
		{http.MethodGet, "/v1/operator/sagas", operatorSagas(svc, opts.Operators), nil},
		{http.MethodGet, "/v1/operator/sagas/:id", operatorSaga(svc, opts.Operators), nil},
		// The operator console: open, it holds no data and asks for the operator's token.
		{http.MethodGet, "/", page, nil},
		{http.MethodGet, "/assets/:name", asset, nil},
	}
	for _, r := range routes {
		e.Add(r.method, r.path, r.handler, r.mw...)
	}
	httpx.Document(e, "/openapi.yaml", "application/yaml", OpenAPI)
}
