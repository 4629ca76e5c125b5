package httpx

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
)

// CheckBearer accepts "Authorization: Bearer <token>" when <token> is one of tokens (empty
// ones ignored; see TokenIs). A missing or malformed header is Unauthorized (401, with
// WWW-Authenticate naming realm; see BearerToken); a wrong token is Forbidden (403). No token
// at all means the endpoints it guards are disabled: Forbidden, with disabled as the message.
func CheckBearer(c echo.Context, realm, disabled string, tokens ...string) error {
	if !slices.ContainsFunc(tokens, func(t string) bool { return t != "" }) {
		return apperr.New(apperr.Forbidden, "%s", disabled)
	}
	given, err := BearerToken(c, realm, article(realm)+" "+realm+" token")
	if err != nil {
		return err
	}
	if !TokenIs(given, tokens...) {
		return apperr.New(apperr.Forbidden, "the %s token is not valid", realm)
	}
	return nil
}

// BearerToken returns the token of "Authorization: Bearer <token>". A missing or malformed
// header is Unauthorized (401) with WWW-Authenticate naming realm, and a message saying that
// want ("an operator token") is required.
func BearerToken(c echo.Context, realm, want string) (string, error) {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	scheme, given, ok := strings.Cut(strings.TrimSpace(h), " ")
	given = strings.TrimSpace(given)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || given == "" {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="`+realm+`"`)
		return "", apperr.New(apperr.Unauthorized, "%s is required: Authorization: Bearer <token>", want)
	}
	return given, nil
}

// TokenIs reports whether given is one of tokens (empty ones ignored), compared in constant
// time over digests, so that neither the time taken nor the length tells anything.
func TokenIs(given string, tokens ...string) bool {
	got := sha256.Sum256([]byte(given))
	match := 0
	for _, t := range tokens {
		if t == "" {
			continue
		}
		want := sha256.Sum256([]byte(t))
		// Every token is compared, so the time taken does not tell which one matched.
		match |= subtle.ConstantTimeCompare(want[:], got[:])
	}
	return match == 1
}

// InvalidToken answers a bearer token that was read but is not valid (a signed token that
// does not verify, or has expired) as RFC 6750 asks: err (an Unauthorized apperr saying why)
// with WWW-Authenticate naming realm and error="invalid_token".
func InvalidToken(c echo.Context, realm string, err error) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="`+realm+`", error="invalid_token"`)
	return err
}

// article is the indefinite article before word: "an operator token", "a service token".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// RequireBearerOrOperator is RequireBearer for routes that token or any operator may call
// (the notifier's read routes: operators look before they act). Every candidate is
// compared, whichever matches. With neither a token nor an operator, the routes are
// disabled: Forbidden, with disabled as the message.
func RequireBearerOrOperator(realm, disabled, token string, ops Operators) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token == "" && ops.Len() == 0 {
				return apperr.New(apperr.Forbidden, "%s", disabled)
			}
			given, err := BearerToken(c, realm, article(realm)+" "+realm+" token")
			if err != nil {
				return err
			}
			isToken := TokenIs(given, token)
			_, isOperator := ops.Identify(given)
			if !isToken && !isOperator {
				return apperr.New(apperr.Forbidden, "the %s token is not valid", realm)
			}
			return next(c)
		}
	}
}

// RequireBearer is CheckBearer as middleware.
func RequireBearer(realm, disabled string, tokens ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := CheckBearer(c, realm, disabled, tokens...); err != nil {
				return err
			}
			return next(c)
		}
	}
}

// OperatorHeader is the header through which callers once named who acted. The token now
// does (see Operator): a request that still sends the header is served only when it names
// the token's own operator, and refused (400) when it names anyone else, rather than
// recording someone other than the caller expected.
const OperatorHeader = "X-Operator"

// OperatorRealm is the bearer realm of the operator endpoints (WWW-Authenticate, messages).
const OperatorRealm = "operator"

// MaxReasonLen bounds the reason an operator gives for an action, in characters.
const MaxReasonLen = 500

// Operator authenticates an operator request: its bearer token must be one operator's (see
// Operators.Identify), whose name it returns as the actor to audit. Without operators the
// endpoints are disabled (403); a missing or malformed Authorization is 401, a token that is
// no operator's 403. An X-Operator header is not trusted: one that names someone other than
// the token's operator is refused (400), one that names them is accepted, as is none.
func Operator(c echo.Context, ops Operators) (actor string, err error) {
	if ops.Len() == 0 {
		return "", apperr.New(apperr.Forbidden, "operator endpoints are disabled: no operator is configured (OPERATOR_TOKENS_FILE)")
	}
	given, err := BearerToken(c, OperatorRealm, "an operator token")
	if err != nil {
		return "", err
	}
	actor, ok := ops.Identify(given)
	if !ok {
		return "", apperr.New(apperr.Forbidden, "the operator token is not valid")
	}
	for _, claimed := range c.Request().Header.Values(OperatorHeader) {
		if strings.TrimSpace(claimed) != actor {
			return "", apperr.New(apperr.Invalid, "the %s header names someone other than the operator whose token this is (%s): "+
				"the token alone says who acts, and the audit trail records %s; leave the header out", OperatorHeader, actor, actor)
		}
	}
	return actor, nil
}

// CheckReason requires an operator's reason: free text (see internal/freetext: no control or
// unassigned characters, valid UTF-8, no white space at either end) of 1–MaxReasonLen
// characters. It is stored in an audit table and logged: a NUL (which Postgres refuses in
// text) or a line break must be refused here, before the action runs.
func CheckReason(reason string) error {
	if reason == "" {
		return apperr.New(apperr.Invalid, "reason is required: say why (it is kept in the audit trail)")
	}
	return freetext.Check("reason", reason, true, MaxReasonLen)
}

// OperatorRequest is how every operator action starts: the operator is authenticated (see
// Operator) before anything is read, then the JSON body is decoded strictly into body, and
// the reason it carries is checked (see CheckReason). It returns the actor to audit: the
// name of the operator whose token the request bears.
func OperatorRequest(c echo.Context, ops Operators, body any, reason *string) (actor string, err error) {
	if actor, err = Operator(c, ops); err != nil {
		return "", err
	}
	if err := DecodeJSON(c, body); err != nil {
		return "", err
	}
	if err := CheckReason(*reason); err != nil {
		return "", err
	}
	return actor, nil
}

// Document serves an embedded document (the OpenAPI description) at path.
func Document(e *echo.Echo, path, contentType string, doc []byte) {
	e.GET(path, func(c echo.Context) error {
		return c.Blob(http.StatusOK, contentType, doc)
	})
}

// Handler serves h (e.g. the Prometheus handler) at GET path, behind mw.
func Handler(e *echo.Echo, path string, h http.Handler, mw ...echo.MiddlewareFunc) {
	e.GET(path, echo.WrapHandler(h), mw...)
}

// Metrics serves h, the Prometheus handler, at GET /metrics: behind token as a bearer token
// when it is set (METRICS_TOKEN), open otherwise (dev); limit, when not nil, admits each
// request first (a client's rate: PerClient).
func Metrics(e *echo.Echo, h http.Handler, token string, limit echo.MiddlewareFunc) {
	var mw []echo.MiddlewareFunc
	if limit != nil {
		mw = append(mw, limit)
	}
	if token != "" {
		mw = append(mw, RequireBearer("metrics", "", token))
	}
	Handler(e, "/metrics", h, mw...)
}
