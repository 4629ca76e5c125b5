package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/testutil/configref"
)

// TestConfigReference holds docs/CONFIGURATION.md's walletsvc section to the flags walletsvc
// defines (go test ./cmd/... -run ConfigReference -update rewrites it).
func TestConfigReference(t *testing.T) {
	t.Parallel()
	section, err := cli.Reference("walletsvc", func(getenv func(string) string, out io.Writer) {
		_, _, _ = parseConfig("serve", nil, getenv, out)
	})
	require.NoError(t, err)
	configref.Require(t, filepath.Join("..", "..", "docs", "CONFIGURATION.md"), "walletsvc", section, *update)
}
