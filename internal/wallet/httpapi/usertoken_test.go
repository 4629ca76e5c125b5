package httpapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/jwtauth"
	"github.com/walletsaga/walletsaga/internal/testutil/openapicheck"
	"github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

const (
	tokenIssuer   = "https://id.example.test"
	tokenAudience = "walletsvc"
)

// issuerKey is the identity provider's signing key, made once (RSA is slow under -race); the
// wallet gets only its public key, as a PEM file.
var issuerKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func publicPEM(t *testing.T, k *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// userTokens is the verifier walletsvc builds from AUTH_JWT_*: the issuer's public key only.
func userTokens(t *testing.T) *jwtauth.Verifier {
	t.Helper()
	v, err := jwtauth.New(jwtauth.Settings{Issuer: tokenIssuer, Audience: tokenAudience, Keys: publicPEM(t, issuerKey()), Leeway: 30 * time.Second})
	require.NoError(t, err)
	return v
}

// newTokenServer serves the wallet API with user tokens; the service token acts for everyone
// unless createOnly.
func newTokenServer(t *testing.T, createOnly bool) *server {
	t.Helper()
	return newServerWith(t, false, httpapi.Options{
		ServiceToken: serviceToken, Operators: operators, UserTokens: userTokens(t), ServiceTokenCreatesUsersOnly: createOnly,
	})
}

// userToken is a token the issuer signs for user, valid for five minutes, changed by edit.
func userToken(t *testing.T, user int64, edit func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": tokenIssuer, "aud": tokenAudience, "sub": strconv.FormatInt(user, 10), "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	if edit != nil {
		edit(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(issuerKey())
	require.NoError(t, err)
	return s
}

// as are the headers of a request with token.
func as(token string) []string {
	return []string{"Authorization", "Bearer " + token}
}

// requireRefused requires res to be status with the error code and a message containing want.
func requireRefused(t *testing.T, res response, status int, code, want string) {
	t.Helper()
	require.Equal(t, status, res.status, res.raw)
	e, ok := res.body["error"].(map[string]any)
	require.True(t, ok, res.raw)
	require.Equal(t, code, e["code"], res.raw)
	require.Contains(t, e["message"], want, res.raw)
}

func (s *server) sagaID(t *testing.T, res response) string {
	t.Helper()
	require.Less(t, res.status, 300, res.raw)
	return strconv.FormatInt(int64(res.body["id"].(float64)), 10)
}

func TestAUserTokenActsForItsUserOnly(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, false)
	u, v := s.createUser(t), s.createUser(t)
	us, vs := strconv.FormatInt(u, 10), strconv.FormatInt(v, 10)
	ann, bob := as(userToken(t, u, nil)), as(userToken(t, v, nil))
	bobsDeposit := s.sagaID(t, s.do(t, http.MethodPost, "/v1/users/"+vs+"/deposits?wait=true", `{"amount":5000}`, bob...))

	// Ann's own wallet, events, operations and sagas.
	res := s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", ann...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, float64(u), res.body["user_id"])
	res = s.do(t, http.MethodGet, "/v1/users/"+us+"/events", "", ann...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	annsDeposit := s.sagaID(t, s.do(t, http.MethodPost, "/v1/users/"+us+"/deposits?wait=true", `{"amount":10000}`, ann...))
	res = s.do(t, http.MethodPost, "/v1/users/"+us+"/purchases?wait=true", `{"amount":100,"merchant":"coffee","reference":"r-1"}`, ann...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	transfer := s.sagaID(t, s.do(t, http.MethodPost, "/v1/transfers?wait=true", fmt.Sprintf(`{"from":%d,"to":%d,"amount":2500}`, u, v), ann...))
	res = s.do(t, http.MethodGet, "/v1/sagas/"+annsDeposit, "", ann...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	res = s.do(t, http.MethodGet, "/v1/sagas/"+transfer, "", bob...)
	require.Equal(t, http.StatusOK, res.status, "the payee reads the transfer it received: %s", res.raw)

	// Ann's list is hers, asked for or not; Bob's includes the transfer he received.
	for _, path := range []string{"/v1/sagas", "/v1/sagas?user_id=" + us} {
		res = s.do(t, http.MethodGet, path, "", ann...)
		require.Equal(t, http.StatusOK, res.status, res.raw)
		require.Len(t, res.body["items"], 3, path)
	}
	res = s.do(t, http.MethodGet, "/v1/sagas", "", bob...)
	require.Len(t, res.body["items"], 2, res.raw)

	// Nothing of Bob's, and nothing written trying.
	before := s.counts(t)
	for _, r := range []struct{ method, path, body, want string }{
		{http.MethodGet, "/v1/users/" + vs + "/wallet", "", fmt.Sprintf("acts for user %d, not user %d", u, v)},
		{http.MethodGet, "/v1/users/" + vs + "/events", "", "not user " + vs},
		{http.MethodPost, "/v1/users/" + vs + "/deposits?wait=true", `{"amount":100}`, "not user " + vs},
		{http.MethodPost, "/v1/users/" + vs + "/purchases?wait=true", `{"amount":100,"merchant":"coffee","reference":"r-2"}`, "not user " + vs},
		{http.MethodPost, "/v1/transfers?wait=true", fmt.Sprintf(`{"from":%d,"to":%d,"amount":100}`, v, u), "paid by that user, not user " + vs},
		{http.MethodGet, "/v1/sagas/" + bobsDeposit, "", "saga " + bobsDeposit + " is not one of user " + us + "'s"},
		{http.MethodGet, "/v1/sagas?user_id=" + vs, "", "not user " + vs + "'s"},
		{http.MethodPost, "/v1/users", `{"name":"Eve","phone":"+8613800138999"}`, "creating a user needs the service token"},
	} {
		requireRefused(t, s.do(t, r.method, r.path, r.body, ann...), http.StatusForbidden, "forbidden", r.want)
	}
	require.Equal(t, before, s.counts(t), "a refused request wrote nothing")

	// The service token still acts for everyone here (ServiceTokenCreatesUsersOnly is off).
	res = s.do(t, http.MethodGet, "/v1/users/"+vs+"/wallet", "")
	require.Equal(t, http.StatusOK, res.status, res.raw)
}

// A user token deposits from the default source and from the payment sources its
// funding_sources claim lists, and from nothing else: another user's card token is 403, and
// nothing is written (no saga, no charge, no Idempotency-Key, no balance change). The
// service token, a backend that checked the source itself, deposits from any.
func TestAUserTokenDepositsOnlyFromItsOwnSources(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, false)
	u, v := s.createUser(t), s.createUser(t)
	us := strconv.FormatInt(u, 10)
	deposits := "/v1/users/" + us + "/deposits?wait=true"
	sources := func(list ...string) func(jwt.MapClaims) {
		return func(c jwt.MapClaims) { c["funding_sources"] = list }
	}
	ann := as(userToken(t, u, sources("tok_ann_visa", "tok_ann_mc")))
	bare := as(userToken(t, u, nil)) // Ann's, listing no source
	bob := as(userToken(t, v, sources("tok_bob_visa")))

	before := s.counts(t)
	charges := len(s.prov.Charges(t))
	for _, r := range []struct {
		name, body string
		headers    []string
		want       string
	}{
		{"Bob's card", `{"amount":100,"source":"tok_bob_visa"}`, ann, `source "tok_bob_visa" is not one of the 2 payment sources this token lists for user ` + us},
		{"Bob's card, with a key", `{"amount":100,"source":"tok_bob_visa"}`, append(slices.Clone(ann), "Idempotency-Key", "ann-1"), "is not one of"},
		{"a source that differs in case", `{"amount":100,"source":"TOK_ANN_VISA"}`, ann, "is not one of"},
		{"any card, from a token listing none", `{"amount":100,"source":"tok_ann_visa"}`, bare, "lists no payment source of user " + us},
	} {
		requireRefused(t, s.do(t, http.MethodPost, deposits, r.body, r.headers...), http.StatusForbidden, "forbidden", r.want)
	}
	require.Equal(t, before, s.counts(t), "a refused deposit wrote nothing: no saga, no operation, no key, no balance")
	require.Len(t, s.prov.Charges(t), charges, "and charged nothing")

	// The key of the refused request is free: the same key with Ann's own card is a new deposit.
	res := s.do(t, http.MethodPost, deposits, `{"amount":100,"source":"tok_ann_visa"}`, append(slices.Clone(ann), "Idempotency-Key", "ann-1")...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	require.Equal(t, "completed", res.body["state"], res.raw)
	require.Empty(t, res.header.Get("Idempotent-Replayed"))
	for _, body := range []string{
		`{"amount":100,"source":"tok_ann_mc"}`,
		`{"amount":100}`,                 // the default source: Ann's own card on file at the gateway
		`{"amount":100,"source":"card"}`, // the same, named
	} {
		res := s.do(t, http.MethodPost, deposits, body, ann...)
		require.Equal(t, http.StatusOK, res.status, res.raw)
	}
	res = s.do(t, http.MethodPost, deposits, `{"amount":100}`, bare...)
	require.Equal(t, http.StatusOK, res.status, "a token listing no source deposits from the default one: %s", res.raw)
	// The backend's service token: it checked the source before it asked.
	res = s.do(t, http.MethodPost, deposits, `{"amount":100,"source":"tok_bob_visa"}`)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	res = s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", ann...)
	require.Equal(t, float64(600), res.body["balance"], res.raw)
	// Bob's card is Bob's: his token deposits from it.
	res = s.do(t, http.MethodPost, "/v1/users/"+strconv.FormatInt(v, 10)+"/deposits?wait=true", `{"amount":100,"source":"tok_bob_visa"}`, bob...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
	var got []string
	for _, c := range s.prov.Charges(t) {
		got = append(got, c.Source)
	}
	require.ElementsMatch(t, []string{"tok_ann_visa", "tok_ann_mc", "card", "card", "card", "tok_bob_visa", "tok_bob_visa"}, got)
}

// A token whose funding_sources claim the wallet cannot read is not valid: 401.
func TestAnUnreadableSourcesClaimIs401(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, false)
	u := s.createUser(t)
	token := userToken(t, u, func(c jwt.MapClaims) { c["funding_sources"] = "tok_ann_visa" })
	res := s.do(t, http.MethodPost, "/v1/users/"+strconv.FormatInt(u, 10)+"/deposits", `{"amount":100,"source":"tok_ann_visa"}`, as(token)...)
	requireRefused(t, res, http.StatusUnauthorized, "unauthorized", `"funding_sources" claim must be an array`)
}

// A token that does not verify is 401 with RFC 6750's invalid_token; one that verifies but
// names nobody is 403.
func TestAnInvalidUserTokenIs401(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, false)
	u := s.createUser(t)
	wallet := "/v1/users/" + strconv.FormatInt(u, 10) + "/wallet"
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	good := jwt.MapClaims{"iss": tokenIssuer, "aud": tokenAudience, "sub": strconv.FormatInt(u, 10), "exp": time.Now().Add(time.Minute).Unix()}
	signed := func(m jwt.SigningMethod, key any) string {
		tok, err := jwt.NewWithClaims(m, good).SignedString(key)
		require.NoError(t, err)
		return tok
	}
	for name, tc := range map[string]struct{ token, want string }{
		"expired":          {userToken(t, u, func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), "expired"},
		"not yet valid":    {userToken(t, u, func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Minute).Unix() }), "not valid yet"},
		"wrong audience":   {userToken(t, u, func(c jwt.MapClaims) { c["aud"] = "notifier" }), "not meant for this service"},
		"wrong issuer":     {userToken(t, u, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), "issuer"},
		"bad signature":    {signed(jwt.SigningMethodRS256, other), "signature does not verify"},
		"alg none":         {signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType), `"none"`},
		"HMAC, public key": {signed(jwt.SigningMethodHS256, publicPEM(t, issuerKey())), `"HS256", which this service does not accept`},
		"not a JWT":        {"wrong-token-wrong-token", "not a well-formed JWT"},
	} {
		res := s.do(t, http.MethodGet, wallet, "", as(tc.token)...)
		requireRefused(t, res, http.StatusUnauthorized, "unauthorized", tc.want)
		require.Equal(t, `Bearer realm="service", error="invalid_token"`, res.header.Get("WWW-Authenticate"), name)
	}
	res := s.do(t, http.MethodGet, wallet, "", "Authorization", "")
	requireRefused(t, res, http.StatusUnauthorized, "unauthorized", "a bearer token (a user's token, or the service token) is required")
	require.Equal(t, `Bearer realm="service"`, res.header.Get("WWW-Authenticate"))

	for claim, sub := range map[string]any{"none": nil, "not a user id": "auth0|abc", "zero": "0", "leading zero": "0" + strconv.FormatInt(u, 10)} {
		token := userToken(t, u, func(c jwt.MapClaims) {
			if sub == nil {
				delete(c, "sub")
			} else {
				c["sub"] = sub
			}
		})
		res := s.do(t, http.MethodGet, wallet, "", as(token)...)
		requireRefused(t, res, http.StatusForbidden, "forbidden", "names no wallet user")
		require.Empty(t, res.header.Get("WWW-Authenticate"), claim)
	}
}

// Every user-facing route checks whose request it is: with another user's token each one
// is 403, with the user's own it is not. The table must name every route the API registers
// that is not an operator's or open, so a new route cannot be left out.
func TestEveryUserFacingRouteChecksTheUser(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, false)
	u, v := s.createUser(t), s.createUser(t)
	us := strconv.FormatInt(u, 10)
	saga := s.sagaID(t, s.do(t, http.MethodPost, "/v1/users/"+us+"/deposits?wait=true", `{"amount":5000}`))
	routes := []struct{ route, path, body string }{
		{"POST /v1/users", "/v1/users", `{"name":"Eve","phone":"+8613800138999"}`},
		{"GET /v1/users/{id}/wallet", "/v1/users/" + us + "/wallet", ""},
		{"GET /v1/users/{id}/events", "/v1/users/" + us + "/events", ""},
		{"POST /v1/users/{id}/deposits", "/v1/users/" + us + "/deposits?wait=true", `{"amount":100}`},
		{"POST /v1/users/{id}/purchases", "/v1/users/" + us + "/purchases?wait=true", `{"amount":100,"merchant":"coffee","reference":"r-1"}`},
		{"POST /v1/users/{id}/withdrawals", "/v1/users/" + us + "/withdrawals?wait=true", `{"amount":100,"destination":"bank"}`},
		{"POST /v1/transfers", "/v1/transfers?wait=true", fmt.Sprintf(`{"from":%d,"to":%d,"amount":100}`, u, v)},
		{"GET /v1/sagas", "/v1/sagas?user_id=" + us, ""},
		{"GET /v1/sagas/{id}", "/v1/sagas/" + saga, ""},
	}
	var named []string
	for _, r := range routes {
		named = append(named, r.route)
	}
	var registered []string
	for _, r := range openapicheck.Routes(s.echo.Routes()) {
		if strings.Contains(r, "/v1/") && !strings.Contains(r, "/v1/operator/") && !strings.HasSuffix(r, "/retry") && !strings.HasSuffix(r, "/resolve") && !strings.HasSuffix(r, "/audit") {
			registered = append(registered, r)
		}
	}
	slices.Sort(named)
	slices.Sort(registered)
	require.Equal(t, registered, named, "every user-facing route is in this table")

	intruder, owner := as(userToken(t, v, nil)), as(userToken(t, u, nil))
	before := s.counts(t)
	for _, r := range routes {
		method := strings.Fields(r.route)[0]
		requireRefused(t, s.do(t, method, r.path, r.body, intruder...), http.StatusForbidden, "forbidden", "")
	}
	require.Equal(t, before, s.counts(t))
	for _, r := range routes {
		method := strings.Fields(r.route)[0]
		res := s.do(t, method, r.path, r.body, owner...)
		if r.route == "POST /v1/users" {
			requireRefused(t, res, http.StatusForbidden, "forbidden", "needs the service token")
			continue
		}
		require.Less(t, res.status, 300, "%s: %s", r.route, res.raw)
	}
}

// SERVICE_TOKEN_SCOPE=create-user: the service token creates users and nothing else; the
// users act for themselves.
func TestAServiceTokenThatOnlyCreatesUsers(t *testing.T) {
	t.Parallel()
	s := newTokenServer(t, true)
	u := s.createUser(t)
	wallet := "/v1/users/" + strconv.FormatInt(u, 10) + "/wallet"
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, wallet, ""},
		{http.MethodPost, "/v1/users/" + strconv.FormatInt(u, 10) + "/deposits", `{"amount":100}`},
		{http.MethodGet, "/v1/sagas", ""},
	} {
		requireRefused(t, s.do(t, r.method, r.path, r.body), http.StatusForbidden, "forbidden", "only creates users")
	}
	res := s.do(t, http.MethodGet, wallet, "", as(userToken(t, u, nil))...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
}

// Without user tokens configured nothing changes: the service token acts for every user, and
// any other bearer token, a well-signed JWT included, is a wrong service token (403).
func TestWithoutUserTokensNothingChanges(t *testing.T) {
	t.Parallel()
	s := newServer(t, false)
	u, v := s.createUser(t), s.createUser(t)
	for _, id := range []int64{u, v} {
		res := s.do(t, http.MethodGet, "/v1/users/"+strconv.FormatInt(id, 10)+"/wallet", "")
		require.Equal(t, http.StatusOK, res.status, res.raw)
	}
	res := s.do(t, http.MethodPost, "/v1/transfers", fmt.Sprintf(`{"from":%d,"to":%d,"amount":1}`, v, u))
	require.Equal(t, http.StatusAccepted, res.status, res.raw)
	res = s.do(t, http.MethodGet, "/v1/users/"+strconv.FormatInt(u, 10)+"/wallet", "", as(userToken(t, u, nil))...)
	requireRefused(t, res, http.StatusForbidden, "forbidden", "the service token is not valid")
	require.Empty(t, res.header.Get("WWW-Authenticate"))
	res = s.do(t, http.MethodGet, "/v1/sagas", "", "Authorization", "")
	requireRefused(t, res, http.StatusUnauthorized, "unauthorized", "a service token is required")
}

// TestATokenThatDoesNotVerifyCountsAgainstItsAddress: a client flooding the API with a new
// forged user token on each request is one client, its address, and is held to its rate; a
// user whose token verifies is a client of its own and is served meanwhile.
func TestATokenThatDoesNotVerifyCountsAgainstItsAddress(t *testing.T) {
	t.Parallel()
	s := newServerWith(t, false, httpapi.Options{
		ServiceToken: serviceToken, Operators: operators, UserTokens: userTokens(t), RatePerSecond: 0.001, RateBurst: 3,
	})
	u := s.createUser(t) // the service token's first request
	us := strconv.FormatInt(u, 10)
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	var statuses []int
	for i := range 5 {
		c := jwt.MapClaims{"iss": tokenIssuer, "aud": tokenAudience, "sub": strconv.Itoa(1000 + i), "exp": time.Now().Add(time.Minute).Unix()}
		forged, err := jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(forger)
		require.NoError(t, err)
		statuses = append(statuses, s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", as(forged)...).status)
	}
	require.Equal(t, []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized,
		http.StatusTooManyRequests, http.StatusTooManyRequests}, statuses, "forged tokens share their address's bucket")
	res := s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", as(userToken(t, u, nil))...)
	require.Equal(t, http.StatusOK, res.status, res.raw)
}

// TestTheServiceTokenKeepsToItsOwnRate: the service token, the backend acting for every
// user, is held to ServiceRatePerSecond, not to the one-client RatePerSecond its users are
// held to; unset, it is not limited at all.
func TestTheServiceTokenKeepsToItsOwnRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		serviceRate float64
		want        []int
	}{
		{"unlimited", 0, []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusOK}},
		{"its own rate", 0.001, []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServerWith(t, false, httpapi.Options{
				ServiceToken: serviceToken, Operators: operators, UserTokens: userTokens(t),
				RatePerSecond: 0.001, RateBurst: 2, ServiceRatePerSecond: tc.serviceRate,
			})
			u := s.createUser(t) // the service token's first request
			us := strconv.FormatInt(u, 10)
			var statuses []int
			for range 3 {
				statuses = append(statuses, s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", as(serviceToken)...).status)
			}
			require.Equal(t, tc.want, append([]int{http.StatusOK}, statuses...))
			ann := as(userToken(t, u, nil))
			require.Equal(t, http.StatusOK, s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", ann...).status)
			require.Equal(t, http.StatusOK, s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", ann...).status)
			require.Equal(t, http.StatusTooManyRequests, s.do(t, http.MethodGet, "/v1/users/"+us+"/wallet", "", ann...).status, "the user at RatePerSecond")
		})
	}
}
