package freetext_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/freetext"
)

// What people write is taken, whatever the script or symbol; the ends may not be white space.
func TestCheckTakesWhatPeopleWrite(t *testing.T) {
	t.Parallel()
	for _, v := range []string{
		"Li Lei", "李雷", "山田\u3000太郎", "José\u00a0María", "O'Brien-Smith", "Ωμέγα", "محمد", "דוד",
		"👨\u200d👩\u200d👧\u200d👦 family", "❤\ufe0f", "🇨🇳", "e\u0301", "zwnj\u200cinside", "\ue000 private use",
		"Robert'); DROP TABLE users;--", "a", strings.Repeat("🙂", 200),
	} {
		require.NoError(t, freetext.Check("name", v, true, 200), "%q", v)
	}
}

func TestCheckRefusesControlUnassignedAndInvalidText(t *testing.T) {
	t.Parallel()
	for v, msg := range map[string]string{
		"":                       "name is required",
		"Li\x00Lei":              "got U+0000 (a control character)",
		"Li\nLei":                "got U+000A (a control character)",
		"tab\there":              "got U+0009",
		"Li\x7fLei":              "got U+007F",
		"c1\u0085":               "got U+0085",
		"\x1b[31mred":            "got U+001B",
		"unassigned\u0378":       "got U+0378 (unassigned)",
		"nonchar\ufffe":          "got U+FFFE (unassigned)",
		"plane 4 \U00040000":     "got U+40000 (unassigned)",
		"Li\xff\xfeLei":          "must be valid UTF-8",
		"Li\xc0\xafLei":          "must be valid UTF-8",
		"Li\ufffdLei":            "must be valid UTF-8",
		" Li":                    "must not start or end with spaces",
		"Li\u3000":               "must not start or end with spaces",
		"\u00a0Li":               "must not start or end with spaces",
		"   ":                    "must not start or end with spaces",
		strings.Repeat("🙂", 201): "at most 200 characters, got 201",
	} {
		require.ErrorContains(t, freetext.Check("name", v, true, 200), msg, "%q", v)
	}
	require.NoError(t, freetext.Check("source", "", false, 64))
}

// The OpenAPI documents state the rule as Pattern: it must accept exactly what Check accepts,
// code point by code point, and at the ends. Go's regexp has no lookahead, so the pattern's
// two parts are checked apart: its class over every code point, and its lookaheads' class.
func TestPatternStatesTheRule(t *testing.T) {
	t.Parallel()
	p := freetext.Pattern()
	const head = `^(?!`
	require.True(t, strings.HasPrefix(p, head) && strings.HasSuffix(p, "]*$"), p[:40])
	spaceEnd := strings.Index(p, `])(?![\s\S]*`)
	require.Positive(t, spaceEnd)
	space := p[len(head) : spaceEnd+1]
	require.Equal(t, `(?![\s\S]*`+space+`$)`, p[spaceEnd+2:spaceEnd+2+len(`(?![\s\S]*`+space+`$)`)])
	body := p[spaceEnd+2+len(`(?![\s\S]*`+space+`$)`) : len(p)-2]

	// Every code point once, in order: the class's runs over it must be the rule's runs.
	var all strings.Builder
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // not representable in UTF-8: no string holds one
		}
		all.WriteRune(r)
	}
	requireRuns(t, all.String(), goClass(body), func(r rune) bool { return !freetext.Refused(r) })
	requireRuns(t, all.String(), goClass(space), freetext.IsSpace)
}

// requireRuns fails t unless the runs of class+ over s are exactly the runs of code points
// for which in holds.
func requireRuns(t *testing.T, s, class string, in func(rune) bool) {
	t.Helper()
	var want [][2]rune
	var got [][2]rune
	for i, r := range s {
		if !in(r) {
			continue
		}
		if n := len(want); n > 0 && want[n-1][1] == prev(s, i) {
			want[n-1][1] = r
			continue
		}
		want = append(want, [2]rune{r, r})
	}
	for _, m := range regexp.MustCompile(class+"+").FindAllStringIndex(s, -1) {
		first, _ := utf8.DecodeRuneInString(s[m[0]:])
		last, _ := utf8.DecodeLastRuneInString(s[:m[1]])
		got = append(got, [2]rune{first, last})
	}
	require.Equal(t, want, got)
}

// prev returns the code point before byte offset i of s (-1 at the start).
func prev(s string, i int) rune {
	if i == 0 {
		return -1
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return r
}

// goClass rewrites the \uXXXX escapes of a class for Go's regexp, which spells them \x{XXXX}.
func goClass(class string) string {
	return regexp.MustCompile(`\\u([0-9A-F]{4})`).ReplaceAllString(class, `\x{$1}`)
}
