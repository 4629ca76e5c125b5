package httpapi

import (
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/jwtauth"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// UserTokens verifies the bearer tokens that name one user (walletsvc: internal/jwtauth).
type UserTokens interface {
	// Verify returns the token's claims: its user claim's value ("" when it has none) and
	// the payment sources its user may deposit from; or an apperr.Unauthorized error saying
	// why the token is not valid.
	Verify(token string) (jwtauth.Claims, error)
}

// caller is who a request to a user-facing route acts as: the service token (a backend
// trusted to act for every user, or, with ServiceTokenCreatesUsersOnly, only to create
// users), or one user, named by a verified user token. The zero value is a user token that
// names no user, which may do nothing.
type caller struct {
	// service: the request carries the service token.
	service bool
	// forAll: the service token acts for every user (false: it only creates users).
	forAll bool
	// user is the user a user token names (0: none, or the claim is no user id).
	user int64
	// claim is the user claim as the token has it, for messages.
	claim string
	// sources are the payment sources a user token lets its user deposit from, besides the
	// default source (see authorizeSource).
	sources []string
}

// accessKind is what a request asks to do.
type accessKind int

const (
	// mayCreateUser: POST /v1/users.
	mayCreateUser accessKind = iota + 1
	// mayActFor: a route of one user (/v1/users/{id}/...): read the wallet or events, deposit,
	// purchase.
	mayActFor
	// mayPay: POST /v1/transfers, paid by access.user.
	mayPay
	// mayReadSaga: GET /v1/sagas/{id}, whose parties are access.user and access.counterparty.
	mayReadSaga
	// mayListSagas: GET /v1/sagas, filtered by access.user (0: unfiltered).
	mayListSagas
)

// access is one request's ask, for authorize.
type access struct {
	kind accessKind
	// user: the path user (mayActFor), the payer (mayPay), the saga's user
	// (mayReadSaga), the user_id filter (mayListSagas).
	user int64
	// counterparty is a transfer saga's payee (mayReadSaga; 0 for other sagas).
	counterparty int64
	// saga is the saga's id (mayReadSaga), for messages.
	saga int64
}

// authorize decides whether who may do what: nil, or a Forbidden error saying why.
//
//   - The service token creates users, and, unless it only creates users, acts for every
//     user on every route.
//   - A user token never creates a user (that is the onboarding backend's, with the service
//     token); it acts only for the user it names: the path's user, the payer of a transfer,
//     a party of a saga (its user, or the payee of a transfer), the user_id of a saga list
//     (an unfiltered list is confined to the user: see sagaListUser).
//   - A user token that names no user (no claim, or no user id in it) may do nothing.
//
// Which source a deposit may charge is authorizeSource's to decide.
func authorize(who caller, what access) error {
	if who.service {
		if what.kind == mayCreateUser || who.forAll {
			return nil
		}
		return apperr.New(apperr.Forbidden, "the service token here only creates users; act for a user with that user's own token")
	}
	if what.kind == mayCreateUser {
		return apperr.New(apperr.Forbidden, "creating a user needs the service token: a user's token acts only for its own user")
	}
	if who.user <= 0 {
		return apperr.New(apperr.Forbidden, "the token names no wallet user: its user claim must be a user id, got %q", freetext.Clip(who.claim, 40))
	}
	switch what.kind {
	case mayActFor:
		if what.user == who.user {
			return nil
		}
		return apperr.New(apperr.Forbidden, "this token acts for user %d, not user %d", who.user, what.user)
	case mayPay:
		if what.user == who.user {
			return nil
		}
		return apperr.New(apperr.Forbidden, "this token acts for user %d: a transfer it makes is paid by that user, not user %d", who.user, what.user)
	case mayReadSaga:
		if what.user == who.user || what.counterparty == who.user {
			return nil
		}
		return apperr.New(apperr.Forbidden, "saga %d is not one of user %d's", what.saga, who.user)
	case mayListSagas:
		if what.user == 0 || what.user == who.user {
			return nil
		}
		return apperr.New(apperr.Forbidden, "this token acts for user %d: it lists that user's sagas, not user %d's", who.user, what.user)
	}
	return apperr.New(apperr.Forbidden, "no user token may do this")
}

// authorizeSource decides whether who may charge source for a deposit to a wallet it may
// act for (authorize has allowed that): nil, or a Forbidden error saying why.
//
//   - The service token charges any source: the backend behind it checked the source is the
//     user's before it asked.
//   - A user token charges the default source, wallet.DefaultSource (named, or implied by
//     leaving source out), which names the user's own source on file at the gateway (the
//     charge carries the user's id, and the gateway resolves it by that id), and the sources
//     its sources claim lists (the identity provider's word that they are the user's). Any
//     other is someone's card token the client chose: refused before anything is written.
func authorizeSource(who caller, source string) error {
	if who.service || source == "" || source == wallet.DefaultSource || slices.Contains(who.sources, source) {
		return nil
	}
	if len(who.sources) == 0 {
		return apperr.New(apperr.Forbidden, "this token lists no payment source of user %d: it deposits from the default source %q only, not %q",
			who.user, wallet.DefaultSource, freetext.Clip(source, 64))
	}
	return apperr.New(apperr.Forbidden, "source %q is not one of the %d payment sources this token lists for user %d (nor the default source %q)",
		freetext.Clip(source, 64), len(who.sources), who.user, wallet.DefaultSource)
}

// sagaListUser is the user_id a saga list is filtered by: the one asked for, or, for a user
// token that asked for none, its own user (authorize has allowed the request).
func sagaListUser(who caller, asked int64) int64 {
	if asked == 0 && !who.service {
		return who.user
	}
	return asked
}

// authenticator reads the credential of a user-facing request.
type authenticator struct {
	serviceToken string
	serviceOnly  bool // the service token only creates users
	users        UserTokens
}

// realm is the realm of the user-facing routes' WWW-Authenticate.
const realm = "service"

// caller returns who the request acts as. No credential configured: 403 (the API is
// disabled). No bearer token: 401. The service token: the service. Another token: with user
// tokens configured, a valid one names its user and an invalid one is 401 (invalid_token);
// without, it is a wrong service token, 403.
func (a authenticator) caller(c echo.Context) (caller, error) {
	if a.serviceToken == "" && a.users == nil {
		return caller{}, apperr.New(apperr.Forbidden, "the wallet API is disabled: no service token is configured")
	}
	want := "a service token"
	if a.users != nil {
		want = "a bearer token (a user's token, or the service token)"
	}
	token, err := httpx.BearerToken(c, realm, want)
	if err != nil {
		return caller{}, err
	}
	if httpx.TokenIs(token, a.serviceToken) {
		return caller{service: true, forAll: !a.serviceOnly}, nil
	}
	if a.users == nil {
		return caller{}, apperr.New(apperr.Forbidden, "the service token is not valid")
	}
	claims, err := a.users.Verify(token)
	if err != nil {
		return caller{}, httpx.InvalidToken(c, realm, err)
	}
	who := caller{claim: claims.User, sources: claims.Sources}
	// Only the canonical spelling names a user: "007" is no user id.
	if id, ok := httpx.Digits(claims.User); ok && id > 0 && strconv.FormatInt(id, 10) == claims.User {
		who.user = id
	}
	return who, nil
}

// isService reports whether token is the service token: the backend acting for every user,
// held to its own rate (Options.ServiceRatePerSecond).
func (a authenticator) isService(token string) bool { return httpx.TokenIs(token, a.serviceToken) }

// validUser reports whether token is a user token that verifies: a client of its own for
// the rate limit (httpx.PerClient), where any other token counts against its address.
func (a authenticator) validUser(token string) bool {
	if a.users == nil {
		return false
	}
	_, err := a.users.Verify(token)
	return err == nil
}

// userHandler serves a user-facing route for who; it calls authorize once it knows what the
// request asks (the path's user, the payer, the saga's parties).
type userHandler func(c echo.Context, who caller) error

// route makes h an echo handler that first establishes who calls, then runs h behind the
// middleware of after (e.g. the bound on sagas in flight), which thus admits only requests
// of a known caller.
func (a authenticator) route(h userHandler, after ...echo.MiddlewareFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		who, err := a.caller(c)
		if err != nil {
			return err
		}
		next := func(c echo.Context) error { return h(c, who) }
		for i := len(after) - 1; i >= 0; i-- {
			next = after[i](next)
		}
		return next(c)
	}
}
