package freetext

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis ends a text that Clip cut.
const Ellipsis = "…"

// Clip returns s as text that is safe to store in a Postgres text column and to echo in a
// message, at most limit characters (code points) long: each run of bytes that is not UTF-8
// becomes U+FFFD, and so does each NUL (Postgres refuses both, SQLSTATE 22021); a longer
// text is cut between two characters, never inside one, and ends with Ellipsis, counted in
// limit. Every text that comes from elsewhere and is stored or echoed (a provider's reply, a
// failure reason, a client's value quoted in an error) goes through it. limit < 1 gives "".
func Clip(s string, limit int) string {
	if limit < 1 {
		return ""
	}
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	s = strings.ReplaceAll(s, "\x00", string(utf8.RuneError))
	if len(s) <= limit || utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit-1 {
			return s[:i] + Ellipsis
		}
		n++
	}
	return s // not reached: s has more than limit characters
}
