package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheCollectorTargetIsGCPercentUnlessGOGCIsSet: the binaries run their collector at
// GCPercent, and an operator's GOGC wins.
func TestTheCollectorTargetIsGCPercentUnlessGOGCIsSet(t *testing.T) {
	was := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(was) })

	tuneGC(func(string) string { return "" })
	require.Equal(t, GCPercent, debug.SetGCPercent(100), "GOGC unset: GCPercent")

	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: the runtime's own reading of it stands")
}
