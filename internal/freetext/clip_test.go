package freetext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/freetext"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"short text is kept", "provider down", 20, "provider down"},
		{"exactly max characters is kept", "李雷李雷", 4, "李雷李雷"},
		{"cut by characters, not bytes", "李雷李雷李", 4, "李雷李…"},
		{"emoji are one character each", strings.Repeat("🙂", 5), 3, "🙂🙂…"},
		{"a byte cut inside a character becomes U+FFFD", "balance \xe4\xbd", 20, "balance \ufffd"},
		{"NUL becomes U+FFFD", "a\x00b", 20, "a\ufffdb"},
		{"invalid bytes then a cut", "\xff\xfe" + strings.Repeat("x", 10), 5, "\ufffdxxx…"},
		{"max 1 keeps only the ellipsis", "abc", 1, "…"},
		{"max 0 gives nothing", "abc", 0, ""},
		{"negative max gives nothing", "abc", -3, ""},
		{"empty stays empty", "", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, freetext.Clip(tc.in, tc.max))
		})
	}
}

// FuzzClip: whatever the bytes, Clip returns valid UTF-8 without NUL of at most limit
// characters; clean text that fits is returned as is, and a cut text is a prefix of the
// cleaned input followed by the ellipsis.
func FuzzClip(f *testing.F) {
	for _, s := range []string{"", "plain", "李雷\xe4\xbd", "a\x00b", "\xff\xfe\xfd", strings.Repeat("🙂", 40), "e\u0301\u0301"} {
		f.Add(s, 3)
		f.Add(s, 1000)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit %= 2000
		got := freetext.Clip(s, limit)
		require.True(t, utf8.ValidString(got), "%q", got)
		require.NotContains(t, got, "\x00")
		if limit < 1 {
			require.Empty(t, got)
			return
		}
		require.LessOrEqual(t, utf8.RuneCountInString(got), limit)
		clean := strings.ReplaceAll(strings.ToValidUTF8(s, "\ufffd"), "\x00", "\ufffd")
		if utf8.RuneCountInString(clean) <= limit {
			require.Equal(t, clean, got)
			return
		}
		require.True(t, strings.HasSuffix(got, freetext.Ellipsis), "%q", got)
		require.True(t, strings.HasPrefix(clean, strings.TrimSuffix(got, freetext.Ellipsis)), "%q is not a prefix of %q", got, clean)
		require.Equal(t, limit, utf8.RuneCountInString(got))
	})
}
