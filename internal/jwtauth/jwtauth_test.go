package jwtauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/jwtauth"
)

const (
	issuer   = "https://id.example.test"
	audience = "walletsvc"
)

// signers are the test's private keys.
type signers struct {
	rsa, otherRSA *rsa.PrivateKey
	ec            *ecdsa.PrivateKey
	ed            ed25519.PrivateKey
}

// testKeys are made once: an RSA key takes a while under -race.
var testKeys = sync.OnceValue(func() signers {
	var k signers
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// pemOf is the PEM PUBLIC KEY block of pub.
func pemOf(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

type jwk struct {
	pub           crypto.PublicKey
	kid, alg, use string
}

// jwksOf is a JWK Set of the public keys given, each with its kid, alg and use.
func jwksOf(t *testing.T, keys ...jwk) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(k.pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.ALG(k.alg), USE: jwkset.USE(k.use)}})
		require.NoError(t, err)
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	require.NoError(t, err)
	return b
}

// claims are valid ones for user 42, changed by edit.
func claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "42", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

// sign signs c with key under method, with kid in the header when not empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func verifier(t *testing.T, s jwtauth.Settings) *jwtauth.Verifier {
	t.Helper()
	if s.Issuer == "" {
		s.Issuer = issuer
	}
	if s.Audience == "" {
		s.Audience = audience
	}
	v, err := jwtauth.New(s)
	require.NoError(t, err)
	return v
}

// refused requires Verify to refuse token as Unauthorized with a message containing want.
func refused(t *testing.T, v *jwtauth.Verifier, token, want string) {
	t.Helper()
	got, err := v.Verify(token)
	require.Error(t, err)
	require.Zero(t, got)
	var e *apperr.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, apperr.Unauthorized, e.Code, "%v", err)
	require.Contains(t, e.Message, want)
}

var secret = []byte(strings.Repeat("s", 64))

// everything trusts the HMAC secret and the RSA and EC keys, with a leeway of 30 s.
func everything(t *testing.T) *jwtauth.Verifier {
	t.Helper()
	k := testKeys()
	return verifier(t, jwtauth.Settings{HMACSecret: secret, Keys: append(pemOf(t, k.rsa.Public()), pemOf(t, k.ec.Public())...), Leeway: 30 * time.Second})
}

func TestATokenSignedByATrustedKeyNamesItsUser(t *testing.T) {
	t.Parallel()
	k := testKeys()
	v := everything(t)
	require.Equal(t, []string{"ES256", "HS256", "HS384", "HS512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}, v.Algorithms())
	for name, token := range map[string]string{
		"RS256":                 sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(nil)),
		"PS512":                 sign(t, jwt.SigningMethodPS512, k.rsa, "", claims(nil)),
		"ES256, any kid":        sign(t, jwt.SigningMethodES256, k.ec, "whatever", claims(nil)),
		"HS512":                 sign(t, jwt.SigningMethodHS512, secret, "", claims(nil)),
		"aud as a list":         sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["aud"] = []string{"other", audience} })),
		"expired within leeway": sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() })),
		"nbf within leeway":     sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(10 * time.Second).Unix() })),
		"sub as a number":       sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["sub"] = 42 })),
		"no iat (optional)":     sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { delete(c, "iat") })),
	} {
		got, err := v.Verify(token)
		require.NoError(t, err, name)
		require.Equal(t, "42", got.User, name)
	}
}

func TestInvalidTokensAreRefusedWithTheirReason(t *testing.T) {
	t.Parallel()
	k := testKeys()
	v := everything(t)
	ago := func(d time.Duration) int64 { return time.Now().Add(-d).Unix() }
	cases := map[string]struct{ token, want string }{
		"expired":              {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["exp"] = ago(time.Minute) })), "expired"},
		"no exp":               {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { delete(c, "exp") })), "lacks a claim"},
		"not valid yet":        {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["nbf"] = ago(-time.Minute) })), "not valid yet"},
		"issued in the future": {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["iat"] = ago(-time.Minute) })), "issued in the future"},
		"another issuer":       {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), "issuer"},
		"no issuer":            {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { delete(c, "iss") })), "lacks a claim"},
		"another audience":     {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["aud"] = "notifier" })), "not meant for this service"},
		"no audience":          {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { delete(c, "aud") })), "lacks a claim"},
		"another RSA key":      {sign(t, jwt.SigningMethodRS256, k.otherRSA, "", claims(nil)), "signature does not verify"},
		"another HMAC secret":  {sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), "", claims(nil)), "signature does not verify"},
		"alg none":             {sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claims(nil)), `signed with "none"`},
		"EdDSA, no such key":   {sign(t, jwt.SigningMethodEdDSA, k.ed, "", claims(nil)), `signed with "EdDSA"`},
		"not a JWT":            {"walletsaga-dev-service-token", "not a well-formed JWT"},
		"two segments":         {"eyJhbGciOiJIUzI1NiJ9.e30", "not a well-formed JWT"},
		"exp not a number":     {sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })), "not valid"},
	}
	// A token whose signature is another token's: the payload changed after signing.
	good := sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(nil))
	forged := strings.Split(sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["sub"] = "43" })), ".")
	forged[2] = strings.Split(good, ".")[2]
	cases["payload changed"] = struct{ token, want string }{strings.Join(forged, "."), "signature does not verify"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			refused(t, v, tc.token, tc.want)
		})
	}
}

// Algorithm confusion: with only public keys configured, a token signed with HMAC — even
// with the public key's own PEM bytes as the secret, the classic attack — is refused, as is
// one that asks for an algorithm its key was not made for.
func TestATokenCannotChooseHowItIsChecked(t *testing.T) {
	t.Parallel()
	k := testKeys()
	rsaPEM := pemOf(t, k.rsa.Public())
	v := verifier(t, jwtauth.Settings{Keys: rsaPEM})
	require.Equal(t, []string{"PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}, v.Algorithms())
	refused(t, v, sign(t, jwt.SigningMethodHS256, rsaPEM, "", claims(nil)), `signed with "HS256", which this service does not accept`)
	refused(t, v, sign(t, jwt.SigningMethodHS256, secret, "", claims(nil)), `signed with "HS256"`)
	refused(t, v, sign(t, jwt.SigningMethodES256, k.ec, "", claims(nil)), `signed with "ES256"`)

	// The other way round: an HMAC-only verifier takes no RSA token.
	h := verifier(t, jwtauth.Settings{HMACSecret: secret[:32]})
	require.Equal(t, []string{"HS256"}, h.Algorithms(), "a 32-byte secret is good for HS256 only")
	refused(t, h, sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(nil)), `signed with "RS256"`)
	_, err := h.Verify(sign(t, jwt.SigningMethodHS256, secret[:32], "", claims(nil)))
	require.NoError(t, err)

	// A JWK that names its alg verifies only that one, and only tokens naming its kid (or none).
	j := verifier(t, jwtauth.Settings{Keys: jwksOf(t, jwk{pub: k.rsa.Public(), kid: "rsa-1", alg: "RS256"}, jwk{pub: k.ec.Public(), kid: "ec-1"})})
	require.Equal(t, []string{"ES256", "RS256"}, j.Algorithms())
	for _, token := range []string{
		sign(t, jwt.SigningMethodRS256, k.rsa, "rsa-1", claims(nil)),
		sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(nil)),
		sign(t, jwt.SigningMethodES256, k.ec, "ec-1", claims(nil)),
	} {
		got, err := j.Verify(token)
		require.NoError(t, err)
		require.Equal(t, "42", got.User)
	}
	refused(t, j, sign(t, jwt.SigningMethodPS256, k.rsa, "rsa-1", claims(nil)), `signed with "PS256"`)
	refused(t, j, sign(t, jwt.SigningMethodRS256, k.rsa, "ec-1", claims(nil)), "names no key")
	refused(t, j, sign(t, jwt.SigningMethodRS256, k.rsa, "rsa-2", claims(nil)), "names no key")
}

func TestTheUserClaim(t *testing.T) {
	t.Parallel()
	k := testKeys()
	v := everything(t)
	for want, c := range map[string]jwt.MapClaims{
		"":      claims(func(c jwt.MapClaims) { delete(c, "sub") }),
		"alice": claims(func(c jwt.MapClaims) { c["sub"] = "alice" }),
		"7":     claims(func(c jwt.MapClaims) { c["sub"] = 7 }),
		"-1":    claims(func(c jwt.MapClaims) { c["sub"] = -1 }),
	} {
		got, err := v.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, "", c))
		require.NoError(t, err)
		require.Equal(t, want, got.User)
	}
	custom := verifier(t, jwtauth.Settings{Keys: pemOf(t, k.rsa.Public()), UserClaim: "wallet_user"})
	got, err := custom.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["wallet_user"] = 9; c["sub"] = "auth0|abc" })))
	require.NoError(t, err)
	require.Equal(t, "9", got.User)
	got, err = custom.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(func(c jwt.MapClaims) { c["wallet_user"] = 9.5 })))
	require.NoError(t, err)
	require.Empty(t, got.User, "a number that is no integer names nobody")
}

// The sources claim lists the payment sources the user may deposit from: an array of
// non-empty strings, or absent (none). Anything else makes the token invalid: the identity
// provider wrote what the wallet cannot read, and guessing could widen what it allows.
func TestTheSourcesClaim(t *testing.T) {
	t.Parallel()
	k := testKeys()
	v := everything(t)
	token := func(edit func(jwt.MapClaims)) string { return sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(edit)) }
	got, err := v.Verify(token(nil))
	require.NoError(t, err)
	require.Empty(t, got.Sources, "no claim, no sources")
	got, err = v.Verify(token(func(c jwt.MapClaims) { c[jwtauth.DefaultSourcesClaim] = []string{"tok_visa_4242", "tok_mc_4444"} }))
	require.NoError(t, err)
	require.Equal(t, jwtauth.Claims{User: "42", Sources: []string{"tok_visa_4242", "tok_mc_4444"}}, got)
	got, err = v.Verify(token(func(c jwt.MapClaims) { c[jwtauth.DefaultSourcesClaim] = []string{} }))
	require.NoError(t, err)
	require.Empty(t, got.Sources)
	for name, bad := range map[string]any{
		"a string":         "tok_visa_4242",
		"a number in it":   []any{"tok_visa_4242", 7},
		"an empty string":  []string{""},
		"an object":        map[string]any{"card": "tok_visa_4242"},
		"null":             nil,
		"a list in a list": []any{[]string{"tok_visa_4242"}},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, v, token(func(c jwt.MapClaims) { c[jwtauth.DefaultSourcesClaim] = bad }), `"funding_sources" claim must be an array`)
		})
	}
	custom := verifier(t, jwtauth.Settings{Keys: pemOf(t, k.rsa.Public()), SourcesClaim: "https://wallet.example/sources"})
	got, err = custom.Verify(token(func(c jwt.MapClaims) {
		c["https://wallet.example/sources"] = []string{"tok_a"}
		c[jwtauth.DefaultSourcesClaim] = []string{"tok_b"}
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"tok_a"}, got.Sources, "only the configured claim counts")
	_, err = jwtauth.New(jwtauth.Settings{Issuer: issuer, Audience: audience, Keys: pemOf(t, k.rsa.Public()), SourcesClaim: "sub"})
	require.ErrorContains(t, err, "name two claims")
}

func TestKeysFiles(t *testing.T) {
	t.Parallel()
	k := testKeys()
	weak, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // G403: a weak key, made to be refused
	require.NoError(t, err)
	rsaDER, err := x509.MarshalPKCS8PrivateKey(k.rsa)
	require.NoError(t, err)
	edPEM := pemOf(t, k.ed.Public())
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	keys, err := jwtauth.ParseKeys(append(append(edPEM, pemOf(t, p384.Public())...),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)})...))
	require.NoError(t, err)
	var kinds []string
	for _, key := range keys {
		kinds = append(kinds, key.Kind)
	}
	require.Equal(t, []string{"Ed25519", "EC P-384", "RSA"}, kinds)

	keys, err = jwtauth.ParseKeys(jwksOf(t, jwk{pub: k.ec.Public(), kid: "sig"}, jwk{pub: k.rsa.Public(), kid: "enc", use: "enc"}))
	require.NoError(t, err)
	require.Len(t, keys, 1, "a key for encryption is skipped")
	require.Equal(t, "sig", keys[0].ID)

	oct := `{"keys":[{"kty":"oct","kid":"h","k":"` + base64.RawURLEncoding.EncodeToString(secret) + `"}]}`
	var privateJWK map[string]any
	require.NoError(t, json.Unmarshal(jwksOf(t, jwk{pub: k.ec.Public(), kid: "p"}), &privateJWK))
	privateJWK["keys"].([]any)[0].(map[string]any)["d"] = "AAAA"
	private, err := json.Marshal(privateJWK)
	require.NoError(t, err)
	for name, tc := range map[string]struct{ data, want string }{
		"empty":            {" \n", "is empty"},
		"garbage":          {"not a key", "neither PEM nor a JWK Set"},
		"private PEM":      {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER})), "only public keys"},
		"weak RSA":         {string(pemOf(t, weak.Public())), "1024 bits is too weak"},
		"trailing garbage": {string(edPEM) + "junk", "after its last PEM block"},
		"bad JSON":         {`{"keys":[`, "not a JWK Set"},
		"no keys":          {`{"keys":[]}`, "holds no key"},
		"only enc":         {string(jwksOf(t, jwk{pub: k.rsa.Public(), kid: "e", use: "enc"})), "holds no key"},
		"symmetric JWK":    {oct, "symmetric key"},
		"private JWK":      {string(private), "private key material"},
		"alg of another":   {string(jwksOf(t, jwk{pub: k.ec.Public(), kid: "x", alg: "RS256"})), "cannot verify RS256"},
	} {
		_, err := jwtauth.ParseKeys([]byte(tc.data))
		require.ErrorContains(t, err, tc.want, name)
	}
	for name, tc := range map[string]struct {
		s    jwtauth.Settings
		want string
	}{
		"no issuer":    {jwtauth.Settings{Audience: audience, HMACSecret: secret}, "issuer is required"},
		"no audience":  {jwtauth.Settings{Issuer: issuer, HMACSecret: secret}, "audience is required"},
		"no key":       {jwtauth.Settings{Issuer: issuer, Audience: audience}, "no key"},
		"short secret": {jwtauth.Settings{Issuer: issuer, Audience: audience, HMACSecret: secret[:31]}, "at least 32 bytes"},
		"big leeway":   {jwtauth.Settings{Issuer: issuer, Audience: audience, HMACSecret: secret, Leeway: time.Hour}, "leeway"},
	} {
		_, err := jwtauth.New(tc.s)
		require.ErrorContains(t, err, tc.want, name)
	}
}
