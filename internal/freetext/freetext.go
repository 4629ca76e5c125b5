// Package freetext is the one rule for text people type into the API — names, merchants,
// references, payment sources, an operator's reason: any character a person writes is
// taken as is (letters of every script, punctuation, symbols, emoji with their joiners and
// variation selectors, NBSP, the ideographic space U+3000, private-use characters), while
// control characters, code points Unicode has not assigned, and text that was not valid
// UTF-8 are refused. The value must not start or end with white space. Lengths count
// characters (code points), as JSON Schema's maxLength does.
//
// Pattern states the same rule as a JSON Schema (ECMA 262) regular expression, so that the
// OpenAPI documents can say exactly what the server takes; a test holds the two together.
//
// Text that comes from elsewhere and is only kept or echoed, not checked (a provider's reply,
// a failure reason, a client's value quoted in an error), goes through Clip instead: made
// valid UTF-8 without NUL and cut by characters, never by bytes.
package freetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// Refused reports whether r may not appear in free text: a control character (C0, DEL, C1),
// a code point that is unassigned in the Unicode version Go's tables hold (noncharacters
// among them), a surrogate, or U+FFFD.
//
// U+FFFD counts as invalid UTF-8: encoding/json silently puts it in place of invalid bytes
// and of lone surrogate escapes (\ud800), so by the time a decoded request reaches a check it
// is the only trace of text that was not UTF-8, and nobody types it on purpose.
func Refused(r rune) bool {
	switch {
	case r < 0 || r > unicode.MaxRune, r == utf8.RuneError, unicode.Is(unicode.Cs, r), unicode.Is(unicode.Cc, r):
		return true
	}
	return !assigned(r)
}

// assigned reports whether Unicode gives r a general category other than Cn (unassigned).
// Go's unicode.C holds Cn too, so the categories are listed one by one.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// IsSpace reports whether r is white space, which free text may hold inside but not at
// either end (unicode.IsSpace: the Unicode White_Space property).
func IsSpace(r rune) bool { return unicode.IsSpace(r) }

// Check requires v to be free text of 1 to max characters (0 to max when not required, an
// empty v then passing), in field's name. The errors are apperr.Invalid and name the first
// offending code point as U+XXXX, not the character itself: it is invisible or would break
// the log line.
func Check(field, v string, required bool, max int) error {
	if v == "" {
		if required {
			return apperr.New(apperr.Invalid, "%s is required", field)
		}
		return nil
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
		return apperr.New(apperr.Invalid, "%s must be valid UTF-8 (invalid bytes, lone surrogates and U+FFFD, which stands for them, are refused)", field)
	}
	for _, r := range v {
		if Refused(r) {
			kind := "unassigned"
			if unicode.Is(unicode.Cc, r) {
				kind = "a control character"
			}
			return apperr.New(apperr.Invalid, "%s must not contain control characters or unassigned code points, got U+%04X (%s)", field, r, kind)
		}
	}
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	if IsSpace(first) || IsSpace(last) {
		return apperr.New(apperr.Invalid, "%s must not start or end with spaces (of any kind: U+3000 and NBSP too)", field)
	}
	if n := utf8.RuneCountInString(v); n > max {
		return apperr.New(apperr.Invalid, "%s must be at most %d characters, got %d", field, max, n)
	}
	return nil
}

// Pattern returns the ECMA 262 regular expression (as JSON Schema's pattern keyword reads
// it) that matches exactly the strings Check accepts, lengths aside: no white space at
// either end (two lookaheads), and every character in the class of those not Refused.
//
// The class is written so that every engine that reads JSON Schema patterns reads it the
// same way: a code point of the Basic Multilingual Plane as the escape \uXXXX (no
// character of the class then has a meaning in a class, in any dialect), one beyond it as
// the character itself (ECMA's \u{…} and Python's \U… have no common spelling; with the
// unicode flag, which JSON Schema validators set, ECMA takes the character as one).
func Pattern() string {
	var b strings.Builder
	b.WriteString("^(?!")
	b.WriteString(class(IsSpace))
	b.WriteString(")(?![\\s\\S]*")
	b.WriteString(class(IsSpace))
	b.WriteString("$)")
	b.WriteString(class(func(r rune) bool { return !Refused(r) }))
	b.WriteString("*$")
	return b.String()
}

// class writes the character class of the code points in for which in is true, as ranges.
func class(in func(rune) bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for r := rune(0); r <= unicode.MaxRune; {
		if !in(r) {
			r++
			continue
		}
		lo := r
		for r <= unicode.MaxRune && in(r) {
			r++
		}
		hi := r - 1
		b.WriteString(point(lo))
		if hi > lo {
			b.WriteByte('-')
			b.WriteString(point(hi))
		}
	}
	b.WriteByte(']')
	return b.String()
}

func point(r rune) string {
	if r <= 0xFFFF {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}
