// Package redact says what logs, stored failure reasons and messages may show of a value
// that is personal or secret: a phone number keeps its last four digits, a URL its scheme,
// host and path (never its userinfo or query, where credentials travel), a request URI its
// phone numbers masked. It is the one place of these rules, for both binaries.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Phone hides all digits of a phone number but the last four: "+8613800001234" →
// "+*********1234". Numbers with four digits or fewer are shown as they are; every other
// character stays where it is.
func Phone(phone string) string {
	digits := 0
	for _, r := range phone {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	var b strings.Builder
	seen := 0
	for _, r := range phone {
		if r >= '0' && r <= '9' {
			seen++
			if seen <= digits-4 {
				b.WriteByte('*')
				continue
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// URL returns rawURL without its userinfo, query and fragment: scheme, host and path only,
// as a provider's address may be logged. A URL that does not parse is "(unparseable URL)".
func URL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// URLError redacts, in place, the URL of the *url.Error that err wraps, if any (see URL),
// and returns err: the HTTP client names the URL it called in its errors, with the query
// and the user name (it hides only a password).
func URLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = URL(ue.URL)
	}
	return err
}

// URI returns a request URI (path and query, as an access log has it) with the phone
// numbers in it masked (see Phone): the value of every query parameter whose name says it
// is one ("phone", "msisdn", "mobile", in any case and within a longer name), and every
// path segment or query value written as an international number ("+" or "%2B", then at
// least seven digits, spaces, hyphens or parentheses). Anything else is kept as it came.
func URI(uri string) string {
	path, query, hasQuery := strings.Cut(uri, "?")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if !looksLikePhone(s) {
			continue
		}
		if dec, err := url.PathUnescape(s); err == nil {
			s = dec
		}
		segs[i] = Phone(s)
	}
	path = strings.Join(segs, "/")
	if !hasQuery {
		return path
	}
	pairs := strings.Split(query, "&")
	for i, pair := range pairs {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(rawKey)
		value, verr := url.QueryUnescape(rawValue)
		switch {
		case kerr != nil || verr != nil:
			// Not decodable: mask every digit but the last four of the pair as it came.
			pairs[i] = Phone(pair)
		case phoneKey(key) || looksLikePhone(rawValue):
			pairs[i] = rawKey + "=" + Phone(value)
		}
	}
	return path + "?" + strings.Join(pairs, "&")
}

// phoneKey reports whether a query parameter's name says it holds a phone number.
func phoneKey(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "phone") || strings.Contains(k, "msisdn") || strings.Contains(k, "mobile")
}

// looksLikePhone reports whether raw (as it came, still escaped) is written as an
// international number: "+" or "%2B", then only digits, spaces ("+", "%20"), hyphens and
// parentheses, with at least seven digits.
func looksLikePhone(raw string) bool {
	var rest string
	switch {
	case strings.HasPrefix(raw, "+"):
		rest = raw[1:]
	case len(raw) >= 3 && strings.EqualFold(raw[:3], "%2B"):
		rest = raw[3:]
	default:
		return false
	}
	rest = strings.ReplaceAll(rest, "%20", " ")
	digits := 0
	for _, r := range rest {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case strings.ContainsRune(" +-()", r):
		default:
			return false
		}
	}
	return digits >= 7
}
