package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
)

// Command takes the first argument that is not a flag as the subcommand, the first command
// by default; it names the commands when the subcommand is none of them, and prints the
// version for --version whatever follows.
func TestCommandReadsTheSubcommand(t *testing.T) {
	t.Parallel()
	commands := [][2]string{{"serve", "the service"}, {"migrate", "the migrations"}}
	var out bytes.Buffer
	sub, rest, err := cli.Command(&out, "walletsvc", []string{"--http-addr", ":1"}, commands)
	require.NoError(t, err)
	require.Equal(t, "serve", sub)
	require.Equal(t, []string{"--http-addr", ":1"}, rest)
	sub, rest, err = cli.Command(&out, "walletsvc", []string{"migrate", "-h"}, commands)
	require.NoError(t, err)
	require.Equal(t, "migrate", sub)
	require.Equal(t, []string{"-h"}, rest)
	sub, _, err = cli.Command(&out, "walletsvc", []string{"frobnicate"}, commands)
	require.Empty(t, sub)
	require.EqualError(t, err, `unknown command "frobnicate" (serve, migrate; -h lists them)`)
	require.Empty(t, out.String())
	sub, _, err = cli.Command(&out, "walletsvc", []string{"frobnicate", "--version"}, commands)
	require.NoError(t, err)
	require.Empty(t, sub)
	require.Contains(t, out.String(), "walletsvc")
}

// Stop ends a run for -h without an error, and for a bad configuration or arguments left
// over with one.
func TestStopSaysWhatEndsARun(t *testing.T) {
	t.Parallel()
	require.NoError(t, cli.Stop(flag.ErrHelp, []string{"x"}))
	require.NoError(t, cli.Stop(nil, nil))
	bad := errors.New("invalid configuration")
	require.ErrorIs(t, cli.Stop(bad, nil), bad)
	require.EqualError(t, cli.Stop(nil, []string{"x"}), `unexpected arguments ["x"]`)
}
