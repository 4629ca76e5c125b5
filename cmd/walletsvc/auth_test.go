package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// issuerKeys makes an identity provider's key and writes its public half where walletsvc
// reads it (AUTH_JWT_KEYS_FILE).
func issuerKeys(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "issuer.pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600))
	return k, file
}

func TestUserTokenSettings(t *testing.T) {
	t.Parallel()
	_, keys := issuerKeys(t)
	parse := func(env map[string]string, args ...string) (config, error) {
		var help bytes.Buffer
		cfg, _, err := parseConfig("serve", args, func(k string) string { return binarytest.DevEnv(env)[k] }, &help)
		if err == nil {
			require.NotContains(t, help.String(), "an-hmac-secret-of-32-bytes-or-more!")
		}
		return cfg, err
	}

	cfg, err := parse(nil)
	require.NoError(t, err)
	require.Nil(t, cfg.UserTokens, "off unless configured")
	require.Equal(t, ScopeAll, cfg.ServiceTokenScope, "without user tokens the service token acts for every user")

	jwtEnv := map[string]string{"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc", "AUTH_JWT_KEYS_FILE": keys}
	cfg, err = parse(jwtEnv)
	require.NoError(t, err)
	require.NotNil(t, cfg.UserTokens)
	require.Equal(t, []string{"ES256"}, cfg.UserTokens.Algorithms())
	require.Equal(t, ScopeCreateUser, cfg.ServiceTokenScope, "with user tokens the service token only creates users, unless told otherwise")
	require.Equal(t, 30*time.Second, cfg.JWT.Leeway)
	require.Equal(t, "sub", cfg.JWT.UserClaim)
	require.Equal(t, "funding_sources", cfg.JWT.SourcesClaim)

	secretFile := filepath.Join(t.TempDir(), "hmac")
	require.NoError(t, os.WriteFile(secretFile, []byte("an-hmac-secret-of-32-bytes-or-more!\n"), 0o600))
	cfg, err = parse(map[string]string{"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc", "AUTH_JWT_HMAC_SECRET_FILE": secretFile,
		"SERVICE_TOKEN_SCOPE": "all", "AUTH_JWT_USER_CLAIM": "wallet_user", "AUTH_JWT_SOURCES_CLAIM": "https://wallet.example/sources", "AUTH_JWT_LEEWAY": "5s"}, "--auth-jwt-keys-file", keys)
	require.NoError(t, err)
	require.Equal(t, "an-hmac-secret-of-32-bytes-or-more!", cfg.JWT.HMACSecret)
	require.Equal(t, []string{"ES256", "HS256"}, cfg.UserTokens.Algorithms(), "the flag names the keys file beside the secret")
	require.Equal(t, ScopeAll, cfg.ServiceTokenScope)
	require.Equal(t, 5*time.Second, cfg.JWT.Leeway)
	require.Equal(t, "https://wallet.example/sources", cfg.JWT.SourcesClaim)

	_, err = parse(map[string]string{"AUTH_JWT_HMAC_SECRET": "an-hmac-secret-of-32-bytes-or-more!"}, "-h")
	require.ErrorIs(t, err, flag.ErrHelp)

	// migrate does not read the keys file: it may run where the file is not mounted.
	_, _, err = parseConfig("migrate", nil, func(k string) string {
		return binarytest.DevEnv(map[string]string{"AUTH_JWT_KEYS_FILE": "/nonexistent/keys.pem", "AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc"})[k]
	}, &bytes.Buffer{})
	require.NoError(t, err)

	private, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(private)
	require.NoError(t, err)
	privateFile := filepath.Join(t.TempDir(), "private.pem")
	require.NoError(t, os.WriteFile(privateFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	with := func(kv map[string]string, drop ...string) map[string]string {
		env := map[string]string{}
		for k, v := range jwtEnv {
			env[k] = v
		}
		for k, v := range kv {
			env[k] = v
		}
		for _, k := range drop {
			delete(env, k)
		}
		return env
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no issuer":               {with(nil, "AUTH_JWT_ISSUER"), "AUTH_JWT_ISSUER: required with user tokens"},
		"no audience":             {with(nil, "AUTH_JWT_AUDIENCE"), "AUTH_JWT_AUDIENCE: required with user tokens"},
		"issuer without a key":    {map[string]string{"AUTH_JWT_ISSUER": "https://id.example"}, "AUTH_JWT_ISSUER: is set, but no key"},
		"audience without a key":  {map[string]string{"AUTH_JWT_AUDIENCE": "walletsvc"}, "AUTH_JWT_AUDIENCE: is set, but no key"},
		"missing keys file":       {with(map[string]string{"AUTH_JWT_KEYS_FILE": "/nonexistent/keys.pem"}), "AUTH_JWT_KEYS_FILE: open /nonexistent/keys.pem"},
		"a private key":           {with(map[string]string{"AUTH_JWT_KEYS_FILE": privateFile}), "AUTH_JWT_KEYS_FILE: " + privateFile + ": PEM block 1 is a PRIVATE KEY"},
		"short HMAC secret":       {with(map[string]string{"AUTH_JWT_HMAC_SECRET": "only-31-bytes-long-secret-xxxxx"}), "AUTH_JWT_HMAC_SECRET: must be at least 32 bytes"},
		"HMAC = service token":    {with(map[string]string{"AUTH_JWT_HMAC_SECRET": "the-same-secret-for-both-of-them!", "SERVICE_TOKEN": "the-same-secret-for-both-of-them!"}), "AUTH_JWT_HMAC_SECRET: must differ"},
		"missing HMAC file":       {with(map[string]string{"AUTH_JWT_HMAC_SECRET_FILE": "/nonexistent/hmac"}), "AUTH_JWT_HMAC_SECRET_FILE"},
		"bad scope":               {with(map[string]string{"SERVICE_TOKEN_SCOPE": "users"}), `SERVICE_TOKEN_SCOPE: must be all or create-user, got "users"`},
		"create-user, no tokens":  {map[string]string{"SERVICE_TOKEN_SCOPE": "create-user"}, "SERVICE_TOKEN_SCOPE: create-user needs user tokens"},
		"leeway too large":        {with(map[string]string{"AUTH_JWT_LEEWAY": "1h"}), "AUTH_JWT_LEEWAY: must be 0–2m0s"},
		"no user claim":           {jwtEnv, "AUTH_JWT_USER_CLAIM: must name a claim"},
		"no sources claim":        {jwtEnv, "AUTH_JWT_SOURCES_CLAIM: must name a claim"},
		"sources claim = user's":  {with(map[string]string{"AUTH_JWT_SOURCES_CLAIM": "sub"}), "AUTH_JWT_SOURCES_CLAIM: must name another claim than AUTH_JWT_USER_CLAIM"},
		"HMAC secret as a flag":   {jwtEnv, "AUTH_JWT_HMAC_SECRET: secrets are not accepted on the command line"},
		"leeway that is not time": {with(map[string]string{"AUTH_JWT_LEEWAY": "soon"}), "AUTH_JWT_LEEWAY"},
	} {
		args := map[string][]string{
			"HMAC secret as a flag": {"--auth-jwt-hmac-secret", "an-hmac-secret-of-32-bytes-or-more!"},
			"no user claim":         {"--auth-jwt-user-claim="},
			"no sources claim":      {"--auth-jwt-sources-claim="},
		}[name]
		_, err := parse(tc.env, args...)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "an-hmac-secret-of-32-bytes-or-more!", "a secret is never echoed")
	}
}

// In production user tokens are optional; configured, they must be sound, and a secret the
// repository documents is refused.
func TestProductionRefusesWeakUserTokenSettings(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"dev HMAC secret": {map[string]string{"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc",
			"AUTH_JWT_HMAC_SECRET": "walletsaga-dev-jwt-secret-of-32-bytes"}, "AUTH_JWT_HMAC_SECRET: is a secret the repository documents"},
		"short HMAC secret": {map[string]string{"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc",
			"AUTH_JWT_HMAC_SECRET": "short-secret-0123"}, "AUTH_JWT_HMAC_SECRET: must be at least 32 bytes"},
		"no issuer": {map[string]string{"AUTH_JWT_AUDIENCE": "walletsvc", "AUTH_JWT_HMAC_SECRET": "an-hmac-secret-of-32-bytes-or-more!"}, "AUTH_JWT_ISSUER: required"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a configuration wrongly accepted returns at once instead of serving
		var out bytes.Buffer
		err := run(ctx, nil, func(k string) string { return tc.env[k] }, &out, &out)
		require.ErrorContains(t, err, tc.want, name)
		require.ErrorContains(t, err, "SERVICE_TOKEN: required", "the service token stays required: it creates users")
	}
}

// walletsvc, configured with an identity provider's public key, lets a user's token act for
// that user only; the service token creates users and, by default with user tokens, nothing
// else.
func TestServeVerifiesUserTokens(t *testing.T) {
	t.Parallel()
	key, keys := issuerKeys(t)
	p := startWithoutBroker(t, map[string]string{
		"AUTH_JWT_ISSUER": "https://id.example", "AUTH_JWT_AUDIENCE": "walletsvc", "AUTH_JWT_KEYS_FILE": keys,
		"AUTH_JWT_SOURCES_CLAIM": "https://wallet.example/sources",
	})
	require.Contains(t, p.Output(), "user tokens accepted")
	require.Contains(t, p.Output(), "sources_claim=https://wallet.example/sources")
	require.Contains(t, p.Output(), "service_token_scope=create-user")
	call := func(method, path, body, token string) (int, map[string]any) {
		return binarytest.Call(t, method, p.URL+path, token, body)
	}
	tokenFor := func(user int64) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"iss": "https://id.example", "aud": "walletsvc", "sub": strconv.FormatInt(user, 10), "exp": time.Now().Add(time.Minute).Unix(),
			"https://wallet.example/sources": []string{fmt.Sprintf("tok_%d", user)},
		}).SignedString(key)
		require.NoError(t, err)
		return s
	}
	status, ann := call(http.MethodPost, "/v1/users", `{"name":"Ann","phone":"+8613800138000"}`, DevServiceToken)
	require.Equal(t, http.StatusCreated, status, "%v", ann)
	status, bob := call(http.MethodPost, "/v1/users", `{"name":"Bob","phone":"+8613800138001"}`, DevServiceToken)
	require.Equal(t, http.StatusCreated, status, "%v", bob)
	// A user id is an integer up to 2^53 - 1: %v of the float64 JSON gives would print 1.2e+14.
	annID, bobID := int64(ann["id"].(float64)), int64(bob["id"].(float64))
	annWallet := fmt.Sprintf("/v1/users/%d/wallet", annID)

	status, body := call(http.MethodGet, annWallet, "", tokenFor(annID))
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = call(http.MethodGet, annWallet, "", tokenFor(bobID))
	require.Equal(t, http.StatusForbidden, status, "%v", body)
	status, body = call(http.MethodGet, annWallet, "", DevServiceToken)
	require.Equal(t, http.StatusForbidden, status, "%v", body)
	require.Contains(t, body["error"].(map[string]any)["message"], "only creates users")
	status, body = call(http.MethodGet, annWallet, "", "walletsaga-not-a-token")
	require.Equal(t, http.StatusUnauthorized, status, "%v", body)
	// Ann's token deposits from the sources its claim lists, not from Bob's card.
	status, body = call(http.MethodPost, fmt.Sprintf("/v1/users/%d/deposits", annID), fmt.Sprintf(`{"amount":100,"source":"tok_%d"}`, bobID), tokenFor(annID))
	require.Equal(t, http.StatusForbidden, status, "%v", body)
	require.Contains(t, body["error"].(map[string]any)["message"], "is not one of the 1 payment sources this token lists")
}
