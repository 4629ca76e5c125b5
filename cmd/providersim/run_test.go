package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// The simulator approves any payment source: without WALLETSAGA_ENV=dev it does not start.
func TestRefusesToStartOutsideDev(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"", "production", "DEV"} {
		err := run(context.Background(), nil, func(k string) string {
			if k == "WALLETSAGA_ENV" {
				return env
			}
			return ""
		}, io.Discard, io.Discard)
		require.ErrorContains(t, err, "WALLETSAGA_ENV", "WALLETSAGA_ENV=%q", env)
	}
}

// Started in production, the simulator names, in one message, that it runs only in dev and
// whatever else is wrong with its settings, checked as production checks them.
func TestProductionListsEveryProblemInOneMessage(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROVIDER_TOKEN": providersim.DevToken}
	args := []string{"--database-url", "postgres://sim:a-db-password-of-ours@db.internal:5432/sim?sslmode=disable"}
	err := run(context.Background(), args, func(k string) string { return env[k] }, io.Discard, io.Discard)
	require.Error(t, err)
	msg := err.Error()
	want := []string{
		"WALLETSAGA_ENV: must be dev",
		"DATABASE_URL: a URL holding a password is not accepted on the command line",
		"DATABASE_URL: reaches db.internal over the network",
		"PROVIDER_TOKEN: is a secret the repository documents",
	}
	for _, w := range want {
		require.Contains(t, msg, "\n  "+w)
	}
	require.Equal(t, len(want), strings.Count(msg, "\n  "), "one line a problem, and no other: %s", msg)
	require.NotContains(t, msg, "a-db-password-of-ours")

	file := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(file, []byte("postgres://sim:a-db-password-of-ours@127.0.0.1:55432/sim?sslmode=disable\n"), 0o600))
	cfg, _, err := parseConfig("serve", nil, func(k string) string {
		return map[string]string{"WALLETSAGA_ENV": "dev", "DATABASE_URL_FILE": file}[k]
	}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "postgres://sim:a-db-password-of-ours@127.0.0.1:55432/sim?sslmode=disable", cfg.DatabaseURL, "DATABASE_URL_FILE")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SIM_FAILURE_RATE": "2"}, "SIM_FAILURE_RATE: must be between 0 and 1"},
		{map[string]string{"SIM_FAILURE_RATE": "often"}, `SIM_FAILURE_RATE: "often" is not a number`},
		{map[string]string{"SIM_LATENCY": "-1s"}, "SIM_LATENCY: must not be negative"},
		{map[string]string{"PROVIDER_TOKEN": "short"}, "PROVIDER_TOKEN: must be at least 16"},
		{map[string]string{"DATABASE_URL": "mysql://x"}, "DATABASE_URL: must be a postgres:// URL"},
		{map[string]string{"HTTP_ADDR": "nowhere"}, "HTTP_ADDR: must be host:port"},
		{map[string]string{"PROVIDERSIM_URL": "127.0.0.1:8082"}, "PROVIDERSIM_URL: must be an http(s) URL"},
	} {
		env := map[string]string{"WALLETSAGA_ENV": "dev"}
		maps.Copy(env, tc.env)
		_, _, err := parseConfig("serve", nil, func(k string) string { return env[k] }, io.Discard)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "short", "a secret never appears in an error")
	}
	cfg, _, err := parseConfig("serve", nil, func(k string) string { return map[string]string{"WALLETSAGA_ENV": "dev"}[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8082", cfg.HTTPAddr)
	require.Equal(t, providersim.DevToken, cfg.Token)
}

// TestConfigReference holds docs/CONFIGURATION.md's providersim section to the flags providersim
// defines (go test ./cmd/... -run ConfigReference -update rewrites it).
func TestConfigReference(t *testing.T) {
	t.Parallel()
	binarytest.RequireConfigReference(t, "providersim", "serve", parseConfig)
}

// A WALLETSAGA_ENV that is no mode, and arguments serve does not take, are problems among
// the settings', named in the same one message (as production's are, above), not alone
// before them.
func TestEveryRefusalComesInOneMessage(t *testing.T) {
	t.Parallel()
	bad := map[string]string{"SIM_FAILURE_RATE": "2", "SIM_LATENCY": "-1s", "HTTP_ADDR": "nowhere"}
	settings := []string{"SIM_FAILURE_RATE: must be between 0 and 1", "SIM_LATENCY: must not be negative", "HTTP_ADDR: must be host:port"}
	for _, tc := range []struct {
		mode string
		args []string
		want []string
	}{
		{"DEV", nil, append([]string{`WALLETSAGA_ENV: must be "dev" or "production"`}, settings...)},
		{"dev", []string{"serve", "now"}, append([]string{`arguments: serve takes none, got ["now"]`}, settings...)},
	} {
		env := map[string]string{"WALLETSAGA_ENV": tc.mode}
		maps.Copy(env, bad)
		err := run(context.Background(), tc.args, func(k string) string { return env[k] }, io.Discard, io.Discard)
		require.Error(t, err, "WALLETSAGA_ENV=%q", tc.mode)
		msg := err.Error()
		for _, want := range tc.want {
			require.Contains(t, msg, "\n  "+want, "WALLETSAGA_ENV=%q %q", tc.mode, tc.args)
		}
		require.LessOrEqual(t, strings.Count(msg, "WALLETSAGA_ENV:"), 1, "the mode named once at most: %s", msg)
	}
}

// The binary serves the contract on a port of its own, and its outage subcommand switches
// the running simulator's outage: on each store.
func TestServesAndSwitchesOutages(t *testing.T) {
	t.Parallel()
	pgURL := ""
	if !testing.Short() {
		_, pgURL = testdb.New(t)
	}
	for name, dbURL := range map[string]string{"memory": "", "postgres": pgURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" && dbURL == "" {
				t.Skip("needs PostgreSQL (-short)")
			}
			env := map[string]string{"WALLETSAGA_ENV": "dev", "DATABASE_URL": dbURL, "LOG_LEVEL": "warn"}
			f := procs.StartFuncTest(t, "providersim", run, nil, env)
			gw, err := provider.NewGateway(provider.Options{URL: f.URL, Token: providersim.DevToken, Timeout: 5 * time.Second})
			require.NoError(t, err)
			id, err := gw.Charge(t.Context(), "1:charge", 7, 500, "CNY", "card")
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(id, "ch_"), id)

			var out bytes.Buffer
			outage := func(args ...string) error {
				return run(t.Context(), append([]string{"outage", "--providersim-url", f.URL}, args...), func(k string) string {
					return map[string]string{"WALLETSAGA_ENV": "dev"}[k]
				}, &out, io.Discard)
			}
			require.NoError(t, outage("gateway", "fail", "90s"))
			require.Contains(t, out.String(), "simulated gateway outage (fail) for 1m30s")
			_, err = gw.Charge(t.Context(), "2:charge", 7, 500, "CNY", "card")
			var re *wallet.RemoteError
			require.ErrorAs(t, err, &re, "the gateway is out")
			require.False(t, re.Permanent)
			require.Equal(t, provider.CodeUnavailable, re.Code)
			require.NoError(t, outage("gateway", "fail", "0s"))
			_, err = gw.Charge(t.Context(), "2:charge", 7, 500, "CNY", "card")
			require.NoError(t, err, "the outage is over")

			require.ErrorContains(t, outage("gateway"), "usage: providersim outage")
			require.ErrorContains(t, outage("bank", "fail", "1s"), "target must be")
			require.ErrorContains(t, outage("merchant", "fail", "soon"), `duration "soon"`)
		})
	}
}
