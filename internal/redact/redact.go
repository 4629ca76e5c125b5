// Package redact says what logs, stored failure reasons, messages, help and exported spans
// may show of a value that is personal or secret: a phone number keeps its last four digits;
// a URL or a database connection string everything but its passwords, keys and tokens (URL);
// a request URI its phone numbers masked. It is the one place of these rules, for both
// binaries.
package redact

import (
	"errors"
	"net/url"
	"slices"
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

// Mask is what URL writes in place of a secret.
const Mask = "xxxxx"

// URL returns a URL, or a PostgreSQL connection string, as anything that leaves the process
// may show it (a log line, an error, -h, a span), with its secrets masked and everything else
// kept as it was written, so that an operator still reads the host, port, path, database and
// parameters such as sslmode:
//
//   - the userinfo: of a database URL (postgres://, postgresql://) the user is kept and the
//     password masked ("walletsaga:xxxxx@"); of any other URL it is left out, since an HTTP
//     API's user name is often its key. A password written without its escapes may hold a
//     '/', '?', '#' or '@' (postgres://u:pa/ss@host): where an '@' past the host part may
//     be the end of the userinfo (see cutUserinfo), it is taken to be, everything before it
//     is masked (the user of a database URL kept if it is one) and what follows it is read
//     for parameters too, so that such a password never shows, at the cost of a detail;
//   - every query or fragment parameter, and every keyword of a keyword/value connection
//     string ("host=db password=… sslmode=require", which pgx takes), whose name says it
//     holds a secret (see SecretName): its value is Mask;
//   - a keyword/value string that does not parse is masked from the point where it stops
//     parsing.
//
// A string with no scheme is read as a reference (a path, a query, a fragment; a Location
// header), with anything before its last '@' masked.
func URL(raw string) string {
	scheme, rest, ok := cutScheme(raw)
	if !ok && isKeywordValue(raw) {
		return keywordValue(raw)
	}
	var b strings.Builder
	// stranded: the userinfo was taken to end at an '@' past the host part, so what follows
	// it may be the tail of a query, and what precedes it a path and a query.
	stranded := false
	if ok {
		b.WriteString(raw[:len(raw)-len(rest)])
		database := strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")
		var userinfo string
		var found bool
		userinfo, rest, found, stranded = cutUserinfo(rest, database)
		user, _, hasPassword := strings.Cut(userinfo, ":")
		switch {
		case !found || !database && !stranded:
			// None, or an HTTP URL's: left out.
		case !database || strings.ContainsAny(user, "/?#@"):
			// Stranded, and no user name to keep: say that something was masked.
			b.WriteString(Mask + "@")
		case hasPassword:
			b.WriteString(user + ":" + Mask + "@")
		default:
			b.WriteString(user + "@")
		}
	} else if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		b.WriteString(Mask + "@")
		rest, stranded = raw[at+1:], true
	}
	head, fragment, hasFragment := strings.Cut(rest, "#")
	head, query, hasQuery := strings.Cut(head, "?")
	if stranded {
		head = maskParams(head)
	}
	b.WriteString(head)
	if hasQuery {
		b.WriteString("?" + maskParams(query))
	}
	if hasFragment {
		b.WriteString("#" + maskParams(fragment))
	}
	return b.String()
}

// cutScheme splits "scheme://rest"; ok is false for a string without a scheme and "//".
func cutScheme(raw string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(raw, "://")
	if !ok || scheme == "" || !isLetter(scheme[0]) {
		return "", raw, false
	}
	for i := range len(scheme) {
		if c := scheme[i]; !isLetter(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return "", raw, false
		}
	}
	return scheme, rest, true
}

// cutUserinfo splits what follows a URL's "//" into its userinfo and the rest. The host
// part ends at the first '/', '?' or '#', and the userinfo at its last '@'. An '@' past the
// host part is where the userinfo ends (stranded) if the URL is a database URL (where an '@'
// has hardly another use), has a userinfo already, or has a host part that is no host[:port]
// list: a password with an unescaped '/', '?', '#' or '@' left it there. Only an '@' in the
// path, query or fragment of an HTTP URL with a plain host and no userinfo is left as data.
func cutUserinfo(rest string, database bool) (userinfo, after string, found, stranded bool) {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at, last := strings.LastIndexByte(rest[:end], '@'), strings.LastIndexByte(rest, '@')
	switch {
	case last >= end && (database || at >= 0 || !isHostList(rest[:end])):
		return rest[:last], rest[last+1:], true, true
	case at >= 0:
		return rest[:at], rest[at+1:], true, false
	}
	return "", rest, false, false
}

// isHostList reports whether s is a comma-separated list of host[:port], each host a name,
// an IPv4 address or an IPv6 address in brackets, each port digits.
func isHostList(s string) bool {
	for h := range strings.SplitSeq(s, ",") {
		port := ""
		if strings.HasPrefix(h, "[") {
			end := strings.IndexByte(h, ']')
			if end < 0 {
				return false
			}
			after := h[end+1:]
			if after != "" && after[0] != ':' {
				return false
			}
			port = strings.TrimPrefix(after, ":")
		} else {
			var hasPort bool
			h, port, hasPort = strings.Cut(h, ":")
			if hasPort && port == "" || strings.ContainsAny(h, ":[]") {
				return false
			}
		}
		if strings.Trim(port, "0123456789") != "" {
			return false
		}
	}
	return true
}

// maskParams masks the value of each parameter of an &-separated list whose name (decoded)
// is a SecretName; every other pair, and the order, stay as written.
func maskParams(params string) string {
	pairs := strings.Split(params, "&")
	for i, pair := range pairs {
		rawKey, value, hasValue := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			key = rawKey
		}
		if hasValue && value != "" && SecretName(key) {
			pairs[i] = rawKey + "=" + Mask
		}
	}
	return strings.Join(pairs, "&")
}

// isKeywordValue reports whether raw is written as a keyword/value connection string: a
// keyword, then '=' (spaces around it allowed).
func isKeywordValue(raw string) bool {
	s := strings.TrimLeft(raw, spaces)
	i := 0
	for i < len(s) && (isLetter(s[i]) || isDigit(s[i]) || s[i] == '_') {
		i++
	}
	return i > 0 && !isDigit(s[0]) && strings.HasPrefix(strings.TrimLeft(s[i:], spaces), "=")
}

// spaces separate a keyword/value string's pairs, as libpq reads it.
const spaces = " \t\n\r\v\f"

// keywordValue masks the value of each secret keyword of a keyword/value connection string,
// read as libpq and pgx read it: keyword = value, the value either single-quoted (a
// backslash escapes the next character) or running to the next space (likewise).
func keywordValue(s string) string {
	var b strings.Builder
	i := 0
	for {
		start := i
		for i < len(s) && strings.IndexByte(spaces, s[i]) >= 0 {
			i++
		}
		if i == len(s) {
			b.WriteString(s[start:])
			return b.String()
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return b.String() + s[start:i] + Mask
		}
		key := strings.TrimRight(s[i:i+eq], spaces)
		if key == "" || strings.ContainsAny(key, spaces) {
			return b.String() + s[start:i] + Mask
		}
		i += eq + 1
		for i < len(s) && strings.IndexByte(spaces, s[i]) >= 0 {
			i++
		}
		valueStart := i
		end, ok := valueEnd(s, i)
		if !ok {
			return b.String() + s[start:valueStart] + Mask
		}
		b.WriteString(s[start:valueStart])
		if SecretName(key) && end > valueStart {
			b.WriteString(Mask)
		} else {
			b.WriteString(s[valueStart:end])
		}
		i = end
	}
}

// valueEnd returns where the value that starts at s[i] ends; ok is false for a quoted value
// that is never closed, or a backslash with nothing after it.
func valueEnd(s string, i int) (end int, ok bool) {
	quoted := i < len(s) && s[i] == '\''
	if quoted {
		i++
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) {
				return 0, false
			}
		case quoted && c == '\'':
			return i + 1, true
		case !quoted && strings.IndexByte(spaces, c) >= 0:
			return i, true
		}
	}
	return i, !quoted
}

// SecretName reports whether a parameter's name says its value is a secret, in any case and
// any style (api_key, apiKey, X-Api-Key, APIKEY). The name is cut into words (at every
// character that is no letter or digit, and where a lower-case letter or a digit meets an
// upper-case one); it is a secret's when one of its words is one of secretWords, or ends in
// one of secretSuffixes (names run together: sslpassword, accesstoken, clientsecret).
func SecretName(name string) bool {
	for _, w := range words(name) {
		if slices.Contains(secretWords, w) {
			return true
		}
		for _, s := range secretSuffixes {
			if strings.HasSuffix(w, s) {
				return true
			}
		}
	}
	return false
}

// secretWords are the words of a parameter name that say it carries a secret: a password
// (pgx's password and sslpassword among them), a token, a key (api_key, X-Api-Key,
// AWSAccessKeyId, which names one), a signature (S3's and Azure's signed URLs: Signature,
// X-Amz-Signature, sig), a credential (X-Amz-Credential), and auth and code (an Azure
// Function's key, an OAuth authorization code). A benign parameter that happens to share a
// word (country_code) is masked too: that loses a detail, never a secret. Word by word,
// sslkey, passfile and sslcert (paths to files) and keepalives are not secrets.
var secretWords = []string{
	"password", "passwd", "pwd", "pass", "passphrase",
	"secret", "token", "jwt", "key", "apikey",
	"signature", "sig", "hmac",
	"auth", "authorization", "credential", "credentials", "code",
}

// secretSuffixes catch names written as one word: a word ending in one of them is a secret's.
var secretSuffixes = []string{
	"password", "passwd", "passphrase", "secret", "token",
	"apikey", "accesskey", "secretkey", "privatekey", "signature", "credential", "credentials",
}

// words cuts a name into lower-case words (see SecretName).
func words(name string) []string {
	var out []string
	var w strings.Builder
	prev := byte(0)
	for i := range len(name) {
		c := name[i]
		switch {
		case !isLetter(c) && !isDigit(c):
			if w.Len() > 0 {
				out = append(out, w.String())
				w.Reset()
			}
		case c >= 'A' && c <= 'Z' && (prev >= 'a' && prev <= 'z' || isDigit(prev)) && w.Len() > 0:
			out = append(out, w.String())
			w.Reset()
			fallthrough
		default:
			w.WriteByte(lower(c))
		}
		prev = c
	}
	if w.Len() > 0 {
		out = append(out, w.String())
	}
	return out
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
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
