package jwtauth

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/MicahParks/jwkset"
)

// ParseKeys reads a public keys file: a JWK Set (JSON, as an identity provider publishes it
// at its jwks_uri) or PEM blocks (PUBLIC KEY, RSA PUBLIC KEY, or CERTIFICATE, whose public
// key is taken; nothing of the certificate is checked). Only public RSA (2048 bits or more),
// EC (P-256, P-384, P-521) and Ed25519 keys are taken: a private key, or a symmetric JWK, is
// refused, because the wallet must hold nothing that can sign a token. JWKs meant for
// encryption (use "enc") are skipped.
func ParseKeys(data []byte) ([]Key, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("the keys file is empty")
	}
	var keys []Key
	var err error
	if bytes.HasPrefix(trimmed, []byte("{")) {
		keys, err = parseJWKSet(trimmed)
	} else {
		keys, err = parsePEM(trimmed)
	}
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("the keys file holds no key that verifies signatures")
	}
	return keys, nil
}

// parseJWKSet reads a JWK Set.
func parseJWKSet(data []byte) ([]Key, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var set jwkset.JWKSMarshal
	if err := dec.Decode(&set); err != nil {
		return nil, fmt.Errorf("the keys file is not a JWK Set: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the keys file holds more than one JSON value")
	}
	var keys []Key
	for i, m := range set.Keys {
		name := m.KID
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		switch {
		case m.KTY == jwkset.KtyOct || m.K != "":
			return nil, fmt.Errorf("key %q is a symmetric key: give an HMAC secret as AUTH_JWT_HMAC_SECRET (or its _FILE), never in the public keys file", name)
		case m.D != "" || m.P != "" || m.Q != "":
			return nil, fmt.Errorf("key %q holds private key material: give the wallet only public keys", name)
		case m.USE == jwkset.UseEnc:
			continue
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", name, err)
		}
		k, err := publicKey(jwk.Key(), m.KID, m.ALG.String())
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", name, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parsePEM reads PEM blocks of public keys or certificates.
func parsePEM(data []byte) ([]Key, error) {
	var keys []Key
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var pub any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		default:
			if strings.Contains(block.Type, "PRIVATE") {
				return nil, fmt.Errorf("PEM block %d is a %s: give the wallet only public keys", n, block.Type)
			}
			return nil, fmt.Errorf("PEM block %d is a %s, not a PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", n, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		k, err := publicKey(pub, "", "")
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		if len(keys) == 0 {
			return nil, errors.New("the keys file is neither PEM nor a JWK Set (JSON)")
		}
		return nil, errors.New("the keys file has text after its last PEM block that is not PEM")
	}
	return keys, nil
}
