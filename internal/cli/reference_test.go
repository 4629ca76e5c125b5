package cli_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
)

func TestReferenceRendersEachSettingInBothModesAndNeverASecret(t *testing.T) {
	t.Parallel()
	const devSecret = "walletsaga-dev-reference-secret"
	got, err := cli.Reference("demo", func(getenv func(string) string, out io.Writer) {
		mode, err := cli.ModeFrom(getenv)
		require.NoError(t, err)
		f := cli.NewFlags("demo serve", mode, getenv, out)
		var s, addr, url, ns, tok, hook string
		var d time.Duration
		f.String(&s, "TOPIC", "events", "topic of a|b")
		f.String(&addr, "HTTP_ADDR", map[cli.Mode]string{cli.Dev: "127.0.0.1:1", cli.Production: ":1"}[mode], "address")
		f.DevString(&ns, "NAMESRV", "127.0.0.1:9876", "name server")
		f.String(&hook, "HOOK_URL", "https://h.example/send?api_key=s3cret-hook&region=eu", "where hooks go")
		f.DatabaseURL(&url, "DATABASE_URL", "", "postgres://u:devpassword@127.0.0.1:1/db", true, "PostgreSQL URL")
		f.Secret(&tok, "API_TOKEN", devSecret, "a token")
		f.Duration(&d, "WAIT", time.Second, "a wait")
		_ = f.Parse(nil)
	})
	require.NoError(t, err)
	for _, row := range []string{
		"## demo\n",
		"| `--topic` | `TOPIC` | `events` | `events` | topic of a\\|b |",
		"| `--http-addr` | `HTTP_ADDR` | `:1` | `127.0.0.1:1` | address |",
		"| `--namesrv` | `NAMESRV` | **required** | `127.0.0.1:9876` |",
		"| `--database-url` | `DATABASE_URL` | **required** | `postgres://u:xxxxx@127.0.0.1:1/db` | PostgreSQL URL; default in dev postgres://u:xxxxx@127.0.0.1:1/db, none in production;",
		"| `--hook-url` | `HOOK_URL` | `https://h.example/send?api_key=xxxxx&region=eu` | `https://h.example/send?api_key=xxxxx&region=eu` | where hooks go |",
		"| `--api-token-file` | `API_TOKEN` or `API_TOKEN_FILE` | none | a documented dev value | **secret**",
		"| `--wait` | `WAIT` | `1s` | `1s` | a wait |",
	} {
		require.Contains(t, got, row)
	}
	require.NotContains(t, got, devSecret)
	require.NotContains(t, got, "devpassword")
	require.NotContains(t, got, "s3cret-hook")
	require.NotContains(t, got, "`--api-token`", "a secret's own flag is refused: the row names its file")
	require.NotContains(t, got, "(env ", "the environment has a column of its own")
	require.Equal(t, 2+2+8, strings.Count(got, "\n"), got)
}

func TestReferenceIgnoresTheMachinesEnvironment(t *testing.T) {
	t.Setenv("TOPIC", "from-this-machine")
	got, err := cli.Reference("demo", func(getenv func(string) string, out io.Writer) {
		mode, err := cli.ModeFrom(getenv)
		require.NoError(t, err)
		var s string
		cli.NewFlags("demo", mode, getenv, out).String(&s, "TOPIC", "events", "topic")
	})
	require.NoError(t, err)
	require.NotContains(t, got, "from-this-machine")
}

func TestReferenceRefusesFlagsNotBuiltOnItsOutput(t *testing.T) {
	t.Parallel()
	_, err := cli.Reference("demo", func(getenv func(string) string, _ io.Writer) {
		cli.NewFlags("demo", cli.Dev, getenv, io.Discard)
	})
	require.ErrorContains(t, err, "no flags")

	_, err = cli.Reference("demo", func(getenv func(string) string, out io.Writer) {
		mode, _ := cli.ModeFrom(getenv)
		f := cli.NewFlags("demo", mode, getenv, out)
		if mode == cli.Dev {
			var s string
			f.String(&s, "DEV_ONLY", "", "bound in dev only")
		}
	})
	require.ErrorContains(t, err, "--dev-only is bound in dev only")
}
