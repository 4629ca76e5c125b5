// Package jwtauth verifies the bearer tokens that name one wallet user: JSON Web Tokens (RFC
// 7519) signed by an identity provider the operator trusts. It is the adapter over
// github.com/golang-jwt/jwt/v5 (parsing, signatures, exp/nbf/iat, iss, aud) and
// github.com/MicahParks/jwkset (JWK Sets); what it decides itself is which keys exist and
// which algorithm each key may verify, so that a token can never choose how it is checked
// (no "none", no HMAC with a public key, no algorithm a key was not made for).
package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// MinHMACSecretLen is the shortest HMAC secret accepted, in bytes: 256 bits, what RFC 7518
// (3.2) asks of an HS256 key. HS384 and HS512 are accepted only with secrets of 48 and 64
// bytes.
const MinHMACSecretLen = 32

// MinRSABits is the smallest RSA modulus accepted.
const MinRSABits = 2048

// MaxLeeway bounds the clock skew allowed on exp, nbf and iat.
const MaxLeeway = 2 * time.Minute

// Settings configure a Verifier. At least one of HMACSecret and Keys must be given; Issuer
// and Audience are always required.
type Settings struct {
	// Issuer is the iss every token must carry, exactly.
	Issuer string
	// Audience is the value a token's aud must contain (this service's name at the issuer).
	Audience string
	// HMACSecret verifies HS256/384/512 tokens. Whoever holds it can sign a token for any
	// user, so it suits one issuer the operator runs; an outside identity provider signs
	// with a private key and gives the wallet only the public key (Keys).
	HMACSecret []byte
	// Keys is the public keys file: PEM blocks (PUBLIC KEY, RSA PUBLIC KEY, CERTIFICATE) or a
	// JWK Set (JSON); see ParseKeys.
	Keys []byte
	// Leeway is the clock skew allowed on exp, nbf and iat (0 to MaxLeeway).
	Leeway time.Duration
	// UserClaim names the claim that holds the wallet user id (empty: "sub").
	UserClaim string
	// SourcesClaim names the claim that lists the payment sources (card tokens) the user may
	// deposit from, an array of strings (empty: DefaultSourcesClaim).
	SourcesClaim string
}

// DefaultSourcesClaim is the claim that lists a user's payment sources unless Settings say
// another.
const DefaultSourcesClaim = "funding_sources"

// Claims is what a verified token says the wallet needs: whom it acts for, and from which
// payment sources that user may deposit.
type Claims struct {
	// User is the value of the user claim: a string, or an integer written as its decimal
	// digits; "" when the token has none (the caller decides what a token naming no user
	// may do).
	User string
	// Sources are the payment sources the sources claim lists, in its order; none when the
	// token has no such claim.
	Sources []string
}

// Verifier checks user tokens. It is safe for concurrent use.
type Verifier struct {
	parser       *jwt.Parser
	keys         []Key
	algs         []string
	userClaim    string
	sourcesClaim string
}

// New returns a Verifier for s, or an error naming what is wrong with s.
func New(s Settings) (*Verifier, error) {
	if s.Issuer == "" {
		return nil, errors.New("an issuer is required: every token's iss must match it")
	}
	if s.Audience == "" {
		return nil, errors.New("an audience is required: every token's aud must contain it")
	}
	if s.Leeway < 0 || s.Leeway > MaxLeeway {
		return nil, fmt.Errorf("the leeway must be 0–%s, got %s", MaxLeeway, s.Leeway)
	}
	var keys []Key
	if len(s.HMACSecret) > 0 {
		k, err := hmacKey(s.HMACSecret)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(s.Keys) > 0 {
		ks, err := ParseKeys(s.Keys)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key: give an HMAC secret, a public keys file, or both")
	}
	var algs []string
	for _, k := range keys {
		for _, a := range k.Algs {
			if !slices.Contains(algs, a) {
				algs = append(algs, a)
			}
		}
	}
	slices.Sort(algs)
	if s.UserClaim == "" {
		s.UserClaim = "sub"
	}
	if s.SourcesClaim == "" {
		s.SourcesClaim = DefaultSourcesClaim
	}
	if s.SourcesClaim == s.UserClaim {
		return nil, fmt.Errorf("the sources claim and the user claim are both %q: name two claims", s.UserClaim)
	}
	return &Verifier{
		parser: jwt.NewParser(
			jwt.WithValidMethods(algs),
			jwt.WithIssuer(s.Issuer),
			jwt.WithAudience(s.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(s.Leeway),
			jwt.WithJSONNumber(),
			jwt.WithStrictDecoding(),
		),
		keys: keys, algs: algs, userClaim: s.UserClaim, sourcesClaim: s.SourcesClaim,
	}, nil
}

// Algorithms lists the algorithms the verifier accepts, sorted.
func (v *Verifier) Algorithms() []string { return slices.Clone(v.algs) }

// Keys lists the keys the verifier holds.
func (v *Verifier) Keys() []Key { return slices.Clone(v.keys) }

// Verify checks token — signature, exp (required), nbf, iat, iss, aud — and returns its
// claims: the user claim's value, and the payment sources its sources claim lists. An
// invalid token, or one whose sources claim is not an array of non-empty strings, is an
// apperr.Unauthorized error saying why, with the library's error as its cause.
func (v *Verifier) Verify(token string) (Claims, error) {
	claims := jwt.MapClaims{}
	t, err := v.parser.ParseWithClaims(token, claims, v.keyFor)
	if err != nil {
		return Claims{}, apperr.Wrap(err, apperr.Unauthorized, "%s", v.reason(t, err))
	}
	var out Claims
	switch u := claims[v.userClaim].(type) {
	case string:
		out.User = u
	case json.Number:
		if _, err := u.Int64(); err == nil {
			out.User = u.String()
		}
	}
	if raw, ok := claims[v.sourcesClaim]; ok {
		if out.Sources, ok = sourceList(raw); !ok {
			return Claims{}, apperr.New(apperr.Unauthorized, "the token's %q claim must be an array of payment sources (non-empty strings)", v.sourcesClaim)
		}
	}
	return out, nil
}

// sourceList returns raw as a list of non-empty strings, or false when it is not one.
func sourceList(raw any) ([]string, bool) {
	list, ok := raw.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// keyFor is the jwt.Keyfunc: the keys that may verify the token's algorithm, narrowed to
// the key its kid names when both the token and the key carry one.
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.keys {
		if slices.Contains(k.Algs, alg) && (k.ID == "" || kid == "" || k.ID == kid) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no key with id %q verifies %s", kid, alg)
	}
	return set, nil
}

// reason says, for a client, why a token was refused.
func (v *Verifier) reason(t *jwt.Token, err error) string {
	if t != nil && t.Method != nil && !slices.Contains(v.algs, t.Method.Alg()) {
		return fmt.Sprintf("the token is signed with %q, which this service does not accept (it accepts %s)", t.Method.Alg(), strings.Join(v.algs, ", "))
	}
	for _, r := range []struct {
		err error
		msg string
	}{
		{jwt.ErrTokenMalformed, "the bearer token is not a well-formed JWT"},
		{jwt.ErrTokenUnverifiable, "the token names no key this service holds (kid) or an algorithm it does not know"},
		{jwt.ErrTokenSignatureInvalid, "the token's signature does not verify with the keys this service trusts"},
		{jwt.ErrTokenExpired, "the token has expired"},
		{jwt.ErrTokenNotValidYet, "the token is not valid yet (nbf)"},
		{jwt.ErrTokenUsedBeforeIssued, "the token was issued in the future (iat)"},
		{jwt.ErrTokenInvalidIssuer, "the token's issuer (iss) is not the one this service trusts"},
		{jwt.ErrTokenInvalidAudience, "the token is not meant for this service (aud)"},
		{jwt.ErrTokenRequiredClaimMissing, "the token lacks a claim this service requires (exp, iss and aud)"},
	} {
		if errors.Is(err, r.err) {
			return r.msg
		}
	}
	return "the token's claims are not valid"
}

// Key is one verification key and the algorithms it may verify.
type Key struct {
	// ID is the key's kid (a JWK's; empty for a PEM key, which then answers any kid).
	ID string
	// Kind is "HMAC", "RSA", "EC P-256", "EC P-384", "EC P-521" or "Ed25519".
	Kind string
	// Algs are the JWS algorithms the key may verify.
	Algs []string
	key  any
}

// hmacKey returns the HMAC key of secret, with the algorithms its length allows.
func hmacKey(secret []byte) (Key, error) {
	if len(secret) < MinHMACSecretLen {
		return Key{}, fmt.Errorf("the HMAC secret must be at least %d bytes (256 bits), got %d", MinHMACSecretLen, len(secret))
	}
	algs := []string{"HS256"}
	if len(secret) >= 48 {
		algs = append(algs, "HS384")
	}
	if len(secret) >= 64 {
		algs = append(algs, "HS512")
	}
	return Key{Kind: "HMAC", Algs: algs, key: slices.Clone(secret)}, nil
}

// publicKey returns the Key of a public key, narrowed to alg when alg is not empty.
func publicKey(pub any, kid, alg string) (Key, error) {
	var k Key
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if bits := p.N.BitLen(); bits < MinRSABits {
			return Key{}, fmt.Errorf("an RSA key of %d bits is too weak (at least %d)", bits, MinRSABits)
		}
		k = Key{Kind: "RSA", Algs: []string{"PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}}
	case *ecdsa.PublicKey:
		switch p.Curve {
		case elliptic.P256():
			k = Key{Kind: "EC P-256", Algs: []string{"ES256"}}
		case elliptic.P384():
			k = Key{Kind: "EC P-384", Algs: []string{"ES384"}}
		case elliptic.P521():
			k = Key{Kind: "EC P-521", Algs: []string{"ES512"}}
		default:
			return Key{}, fmt.Errorf("an EC key on curve %s cannot verify a JWT (P-256, P-384 or P-521)", p.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		k = Key{Kind: "Ed25519", Algs: []string{"EdDSA"}}
	default:
		return Key{}, fmt.Errorf("a %T cannot verify a JWT (RSA, EC or Ed25519 public keys)", pub)
	}
	if alg != "" {
		if !slices.Contains(k.Algs, alg) {
			return Key{}, fmt.Errorf("key %q is an %s key, which cannot verify %s", kid, k.Kind, alg)
		}
		k.Algs = []string{alg}
	}
	k.ID, k.key = kid, pub
	return k, nil
}
