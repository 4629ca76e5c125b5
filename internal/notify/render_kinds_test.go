package notify

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Every kind of balance change (walletevent.Kinds, the one list) has a text in every locale
// Render writes, and no locale has a text for a kind that does not exist. Each renders
// cleanly: both amounts in it, no formatting error ("%!"), and it ends with the balance after
// the change and the sentence's full stop, where the audit reads it.
func TestEveryKindHasATemplateInEveryLocale(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, []string{LocaleEN, LocaleZhCN}, slices.Collect(maps.Keys(templates)), "the locales Render writes")
	for locale, table := range templates {
		require.ElementsMatch(t, walletevent.Kinds(), slices.Collect(maps.Keys(table)), "the kinds with a %s text", locale)
		for _, kind := range walletevent.Kinds() {
			e := walletevent.Event{V: walletevent.Version, UserID: 7, Seq: 3, Kind: kind, Amount: -1234, Currency: "CNY",
				BalanceAfter: 98765, Phone: "+8613800001234", Locale: locale}
			m, err := Render(e)
			require.NoError(t, err, "%s %s", locale, kind)
			require.Equal(t, locale, m.Locale)
			require.NotContains(t, m.Text, "%!", "%s %s: %q", locale, kind, m.Text)
			require.Contains(t, m.Text, "12.34 CNY", "%s %s: %q", locale, kind, m.Text)
			end := map[string]string{LocaleEN: ".", LocaleZhCN: "。"}[locale]
			require.True(t, strings.HasSuffix(m.Text, "987.65 CNY"+end), "%s %s: %q ends with the balance after it", locale, kind, m.Text)
		}
	}
}

// A valid kind without a text is refused, never sent with a formatting error in it.
func TestRenderRefusesAKindWithoutAText(t *testing.T) {
	t.Parallel()
	table := map[string]map[walletevent.Kind]string{
		LocaleEN:   {walletevent.Deposit: "You topped up %s. Balance: %s."},
		LocaleZhCN: {walletevent.Deposit: "您已充值 %s，余额 %s。"},
	}
	e := walletevent.Event{V: walletevent.Version, UserID: 7, Seq: 3, Kind: walletevent.Refund, Amount: 100, Currency: "CNY",
		BalanceAfter: 100, Phone: "+8613800001234", Locale: "zh-CN"}
	_, err := render(e, table)
	require.Error(t, err)
	require.Equal(t, apperr.Internal, apperr.CodeOf(err))
	require.ErrorContains(t, err, `no zh-CN text for kind "refund"`)

	e.Kind = walletevent.Deposit
	m, err := render(e, table)
	require.NoError(t, err)
	require.Equal(t, "您已充值 1.00 CNY，余额 1.00 CNY。", m.Text)
}
