package scrape_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/scrape"
)

func TestValueReadsTheWholeSeries(t *testing.T) {
	t.Parallel()
	text := "# HELP x_total Things.\n# TYPE x_total counter\nx_total{writer=\"inbox2\"} 9\nx_total{writer=\"inbox\"} 3\ny 1.5e+06\n"
	v, ok := scrape.Value(text, `x_total{writer="inbox"}`)
	require.True(t, ok)
	require.InDelta(t, 3, v, 0)
	v, ok = scrape.Value(text, "y")
	require.True(t, ok)
	require.InDelta(t, 1.5e6, v, 0)
	_, ok = scrape.Value(text, "x_total")
	require.False(t, ok, "a name without its labels is not the series")
}
