package pg

import (
	"errors"
	"net/url"
	"strings"
)

// URL is a database URL as pgx reads it, in libpq's syntax:
// postgres[ql]://[user[:password]@][host[:port][,host[:port]…]][/dbname][?param=value&…].
// Several hosts are how a client finds the primary of a cluster with a standby (with
// target_session_attrs=read-write). net/url refuses some host lists pgx takes (a port on any
// host but the last, an IPv6 address among others), so ParseURL keeps the list apart and
// lets net/url parse the rest.
type URL struct {
	// Hosts are the host[:port] of the URL's host list as written (an IPv6 address in
	// brackets, a Unix socket's directory percent-encoded); an empty one is pgx's default.
	Hosts []string
	// rest is the URL with the host list replaced by standIn.
	rest   *url.URL
	scheme string
	// rawQuery is what follows the first '?' after the host list, as pgx reads it: to the
	// end, a '#' included (net/url would end the query there).
	rawQuery string
}

// standIn takes the host list's place in the URL net/url parses.
const standIn = "hosts"

// ParseURL parses v (see URL). Its errors never quote v, which may hold a password.
func ParseURL(v string) (URL, error) {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok || (scheme != "postgres" && scheme != "postgresql") {
		return URL{}, errors.New("not a postgres:// or postgresql:// URL")
	}
	// As pgx reads it: the user part ends at an '@' before the first '/', and the host list
	// at the first '/' or '?'.
	userinfo := ""
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		userinfo, rest = rest[:i+1], rest[i+1:]
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	hosts := strings.Split(rest[:end], ",")
	for _, h := range hosts {
		if err := checkHost(h); err != nil {
			return URL{}, err
		}
	}
	u, err := url.Parse(scheme + "://" + userinfo + standIn + rest[end:])
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		return URL{}, err
	}
	rawQuery := ""
	if _, q, ok := strings.Cut(rest[end:], "?"); ok {
		rawQuery = q
	}
	return URL{Hosts: hosts, rest: u, scheme: scheme, rawQuery: rawQuery}, nil
}

// checkHost checks one host[:port] of a host list: a name or IPv4 address, or an IPv6
// address in brackets, then a port of digits or none.
func checkHost(h string) error {
	port := ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return errors.New("an IPv6 host without its closing ]")
		}
		if after := h[end+1:]; after != "" {
			if after[0] != ':' {
				return errors.New("an IPv6 host followed by something other than :port")
			}
			port = after[1:]
		}
	} else {
		var hasPort bool
		_, port, hasPort = strings.Cut(h, ":")
		if hasPort && strings.Contains(port, ":") {
			return errors.New("an IPv6 host must be written in brackets")
		}
	}
	if strings.Trim(port, "0123456789") != "" {
		return errors.New("a port that is not a number")
	}
	return nil
}

// Names are the host names of the URL's host list, decoded, without their ports or
// brackets ("" for a host left to pgx's default).
func (u URL) Names() []string {
	names := make([]string, len(u.Hosts))
	for i, h := range u.Hosts {
		switch {
		case strings.HasPrefix(h, "["):
			h = h[1:strings.IndexByte(h, ']')]
		default:
			h, _, _ = strings.Cut(h, ":")
		}
		if d, err := url.PathUnescape(h); err == nil {
			h = d
		}
		names[i] = h
	}
	return names
}

// Query returns the URL's parameters as net/url reads them. A setting the checks rely on is
// read with Param or Params, as pgx reads it.
func (u URL) Query() url.Values { return u.rest.Query() }

// Params returns every value of the URL's parameter key, in the order written, read as pgx
// (and libpq) read the query: everything after the first '?', a '#' included, split at '&',
// each key and value percent-decoded once its surrounding spaces are trimmed. net/url reads
// some URLs otherwise (it ends the query at '#', keeps the spaces), and its Get takes the
// first value where pgx takes the last.
func (u URL) Params(key string) []string {
	var out []string
	for _, p := range u.params() {
		if p[0] == key {
			out = append(out, p[1])
		}
	}
	return out
}

// Param returns the value pgx takes for the URL's parameter key: the last one written, ""
// for none. For sslmode it applies the alias pgx takes from JDBC: ssl=true, when it is the
// last ssl value and comes after the last sslmode, is sslmode=require.
func (u URL) Param(key string) string {
	var v, ssl string
	sslLast := false
	for _, p := range u.params() {
		switch {
		case p[0] == key:
			v, sslLast = p[1], false
		case key == "sslmode" && p[0] == "ssl":
			ssl, sslLast = p[1], true
		}
	}
	if ssl == "true" && sslLast {
		return "require"
	}
	return v
}

// params are the URL's parameters as pgx reads them (see Params), key and value each.
func (u URL) params() [][2]string {
	var out [][2]string
	for pair := range strings.SplitSeq(u.rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		out = append(out, [2]string{decodeParam(k), decodeParam(v)})
	}
	return out
}

// decodeParam decodes a key or value of the query as pgx does: the spaces around it trimmed,
// then each %XX decoded; what pgx refuses (a bad %XX, a space inside) is kept as written,
// since pgx then refuses the whole URL at connect.
func decodeParam(s string) string {
	s = strings.Trim(s, " ")
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

// Password returns the password pgx connects with from the URL ("" for none): its password
// parameter (the last one written, read as Param reads it) when it has one, which pgx lets
// override the user part, else the user part's.
func (u URL) Password() string {
	if pws := u.Params("password"); len(pws) > 0 {
		return pws[len(pws)-1]
	}
	pw, _ := u.rest.User.Password()
	return pw
}
