package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/buildinfo"
	"github.com/walletsaga/walletsaga/internal/cli"
	notifyapi "github.com/walletsaga/walletsaga/internal/notify/httpapi"
	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/reqid"
	walletapi "github.com/walletsaga/walletsaga/internal/wallet/httpapi"
)

func TestJSONLoggerWritesOneObjectPerLineWithTheRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := cli.Logger(&buf, "json", "info")
	require.NoError(t, err)
	log.InfoContext(reqid.With(context.Background(), "rid-1"), "hello", "user_id", 7)
	log.Debug("hidden at info")
	var rec map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec), buf.String())
	require.Equal(t, "hello", rec["msg"])
	require.Equal(t, "INFO", rec["level"])
	require.Equal(t, "rid-1", rec["request_id"])
	require.Equal(t, 7.0, rec["user_id"])

	buf.Reset()
	log, err = cli.Logger(&buf, "text", "debug")
	require.NoError(t, err)
	log.DebugContext(reqid.With(context.Background(), "rid-2"), "hi")
	require.Contains(t, buf.String(), "request_id=rid-2")

	_, err = cli.Logger(&buf, "xml", "info")
	require.ErrorContains(t, err, "LOG_FORMAT")
	_, err = cli.Logger(&buf, "json", "loud")
	require.ErrorContains(t, err, "LOG_LEVEL")
}

func TestSecretsComeFromTheEnvironmentOrAFileNeverAFlag(t *testing.T) {
	t.Parallel()
	const secret = "top-secret-value-123"
	var help bytes.Buffer
	f := cli.NewFlags("x", cli.Production, func(k string) string { return map[string]string{"API_TOKEN": secret}[k] }, &help)
	var tok string
	f.Secret(&tok, "API_TOKEN", "", "a token")
	require.NoError(t, f.Parse(nil))
	require.NoError(t, f.Err())
	require.Equal(t, secret, tok, "read from the environment")
	f.FlagSet().Usage()
	require.Contains(t, help.String(), "API_TOKEN")
	require.NotContains(t, help.String(), secret)

	f = cli.NewFlags("x", cli.Dev, func(string) string { return "" }, &help)
	f.Secret(&tok, "API_TOKEN", "", "a token")
	require.NoError(t, f.Parse([]string{"--api-token", "from-flag-0123456"}))
	require.ErrorContains(t, f.Err(), "API_TOKEN: secrets are not accepted on the command line", "refused in every mode")
	require.NotContains(t, f.Err().Error(), "from-flag-0123456", "the value is never echoed")
	require.NotEqual(t, "from-flag-0123456", tok)

	file := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	f = cli.NewFlags("x", cli.Production, func(string) string { return "" }, &help)
	f.Secret(&tok, "API_TOKEN", "", "a token")
	require.NoError(t, f.Parse([]string{"--api-token-file", file}))
	require.NoError(t, f.Err())
	require.Equal(t, secret, tok, "read from the file, trimmed")

	f = cli.NewFlags("x", cli.Production, func(k string) string {
		return map[string]string{"API_TOKEN_FILE": filepath.Join(t.TempDir(), "missing")}[k]
	}, &help)
	f.Secret(&tok, "API_TOKEN", "", "a token")
	require.NoError(t, f.Parse(nil))
	require.ErrorContains(t, f.Err(), "API_TOKEN_FILE")

	got, err := cli.ReadSecret("API_TOKEN_FILE", "v", "")
	require.NoError(t, err)
	require.Equal(t, "v", got)
}

func TestTheModeIsProductionUnlessDevIsAskedFor(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]cli.Mode{"": cli.Production, "production": cli.Production, "dev": cli.Dev} {
		got, err := cli.ModeFrom(func(string) string { return v })
		require.NoError(t, err)
		require.Equal(t, want, got, "%q", v)
	}
	for _, v := range []string{"development", "Dev", "prod", "test"} {
		_, err := cli.ModeFrom(func(string) string { return v })
		require.ErrorContains(t, err, "WALLETSAGA_ENV", "a typo falls back to neither mode: %q", v)
	}
}

func TestDevDefaultsHoldOnlyInDev(t *testing.T) {
	t.Parallel()
	parse := func(mode cli.Mode, env map[string]string, args ...string) (string, string, error) {
		f := cli.NewFlags("x", mode, func(k string) string { return env[k] }, io.Discard)
		var url, tok string
		f.DevString(&url, "DATABASE_URL", "postgres://dev", "db")
		f.Secret(&tok, "SERVICE_TOKEN", "walletsaga-dev-service-token", "token")
		require.NoError(t, f.Parse(args))
		return url, tok, f.Err()
	}
	url, tok, err := parse(cli.Dev, nil)
	require.NoError(t, err)
	require.Equal(t, "postgres://dev", url)
	require.Equal(t, "walletsaga-dev-service-token", tok)

	url, tok, err = parse(cli.Production, nil)
	require.ErrorContains(t, err, "DATABASE_URL: required")
	require.ErrorContains(t, err, "WALLETSAGA_ENV=dev", "production says how to get the dev defaults")
	require.Empty(t, url)
	require.Empty(t, tok, "no secret default outside dev")

	url, _, err = parse(cli.Production, map[string]string{"DATABASE_URL": "postgres://env"})
	require.NoError(t, err)
	require.Equal(t, "postgres://env", url)
	url, _, err = parse(cli.Production, map[string]string{"DATABASE_URL": "postgres://env"}, "--database-url", "postgres://flag")
	require.NoError(t, err)
	require.Equal(t, "postgres://flag", url, "a flag overrides the environment")

	f := cli.NewFlags("x", cli.Production, func(string) string { return "" }, io.Discard)
	var a, b string
	f.DevString(&a, "DATABASE_URL", "postgres://dev", "db")
	f.DevString(&b, "ROCKETMQ_NAMESRV", "127.0.0.1:9876", "namesrv")
	f.OnlyRequire("DATABASE_URL")
	require.NoError(t, f.Parse(nil))
	require.ErrorContains(t, f.Err(), "DATABASE_URL")
	require.NotContains(t, f.Err().Error(), "ROCKETMQ_NAMESRV", "a subcommand requires only what it uses")
}

func TestHelpListsCommandsAndConventionalFlags(t *testing.T) {
	t.Parallel()
	var help bytes.Buffer
	f := cli.NewFlags("svc serve", cli.Production, func(string) string { return "" }, &help,
		[2]string{"serve", "serve it"}, [2]string{"migrate", "migrate it"})
	var url, tok string
	f.DevString(&url, "DATABASE_URL", "postgres://dev", "db")
	f.Secret(&tok, "SERVICE_TOKEN", "", "the token")
	require.ErrorIs(t, f.Parse([]string{"-h"}), flag.ErrHelp)
	for _, want := range []string{"Usage: svc [command] [flags]", "serve ", "migrate ", "--database-url", "(env DATABASE_URL)",
		"SERVICE_TOKEN (or SERVICE_TOKEN_FILE / --service-token-file)"} {
		require.Contains(t, help.String(), want)
	}
	require.NotContains(t, help.String(), "--service-token ", "a secret has no flag of its own")
}

// -h shows a URL, whether its default or the environment's value, as logs do: the password
// of a database URL and the key in a provider's query masked, the rest as it is.
func TestHelpShowsNoSecretOfAURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SMS_WEBHOOK_URL": "https://acct:s3cret-user@sms.example.com/send?api_key=s3cret-key&region=eu"}
	var help bytes.Buffer
	f := cli.NewFlags("svc", cli.Dev, func(k string) string { return env[k] }, &help)
	var hook, db string
	f.String(&hook, "SMS_WEBHOOK_URL", "", "URL the webhook sender POSTs to")
	f.DatabaseURL(&db, "DATABASE_URL", "", "postgres://walletsaga:s3cret-dev@127.0.0.1:55432/walletsaga?sslmode=disable", true, "PostgreSQL URL")
	require.ErrorIs(t, f.Parse([]string{"-h"}), flag.ErrHelp)
	require.NotContains(t, help.String(), "s3cret")
	require.Contains(t, help.String(), `(default "https://sms.example.com/send?api_key=xxxxx&region=eu")`)
	require.Contains(t, help.String(), "default in dev postgres://walletsaga:xxxxx@127.0.0.1:55432/walletsaga?sslmode=disable, none in production")
}

func TestDurabilityIsEnforcedInProductionOnly(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	unsafe := []string{"fsync is off"}
	require.NoError(t, cli.RequireDurable(cli.Production, log, "db", nil, ""), "a durable server passes")
	err := cli.RequireDurable(cli.Production, log, "db", unsafe, "")
	require.ErrorContains(t, err, "fsync is off")
	require.ErrorContains(t, err, "ALLOW_UNSAFE_DURABILITY")
	require.NoError(t, cli.RequireDurable(cli.Production, log, "db", unsafe, "load test, data is disposable"))
	require.Contains(t, logs.String(), "load test, data is disposable", "the stated reason is logged")
	require.NoError(t, cli.RequireDurable(cli.Dev, log, "db", unsafe, ""))

	var p cli.Problems
	p.CheckOverride("ALLOW_UNSAFE_DURABILITY", "true")
	require.ErrorContains(t, p.Err(), "reason in words")
}

func TestServiceURLsMustBeSecureInProduction(t *testing.T) {
	t.Parallel()
	check := func(mode cli.Mode, v string) string {
		var p cli.Problems
		p.CheckServiceURL(mode, "U", v)
		if err := p.Err(); err != nil {
			return err.Error()
		}
		return ""
	}
	require.Empty(t, check(cli.Production, "https://sms.example.com/send"))
	require.Empty(t, check(cli.Production, "http://127.0.0.1:9000/send"), "a loopback sidecar")
	require.Contains(t, check(cli.Production, "http://sms.example.com/send"), "https")
	require.Empty(t, check(cli.Dev, "http://sms.example.com/send"))
	require.Contains(t, check(cli.Dev, "ftp://x"), "http(s) URL")
	msg := check(cli.Production, "http://acct:pw@sms.example.com/send?key=s3cret-key")
	require.Contains(t, msg, "http://sms.example.com/send", "the refusal names the address")
	for _, leak := range []string{"acct", "pw", "s3cret-key"} {
		require.NotContains(t, msg, leak, "no userinfo or query in the refusal")
	}
}

func TestWriteAddrFileWritesTheBoundAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	path := filepath.Join(t.TempDir(), "addr")
	require.NoError(t, cli.WriteAddrFile(path, ln.Addr()))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, ln.Addr().String()+"\n", string(b))
	require.NotContains(t, string(b), ":0\n", "the port the listener got, not the one asked for")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left beside it")

	require.NoError(t, cli.WriteAddrFile("", ln.Addr()), "no path, nothing written")
	require.Error(t, cli.WriteAddrFile(filepath.Join(t.TempDir(), "missing", "addr"), ln.Addr()))
}

// No document a binary serves names a token: /openapi.yaml is open to anyone who can reach
// the port, so a token written there would be published with it.
func TestNoServedDocumentNamesAToken(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`walletsaga-[a-z0-9-]+`)
	for name, doc := range map[string][]byte{
		"wallet": walletapi.OpenAPI, "notifier": notifyapi.OpenAPI, "provider": provider.OpenAPI(),
	} {
		for _, m := range re.FindAllString(string(doc), -1) {
			require.False(t, cli.IsDocumentedSecret(m), "the %s document names the token %s", name, m)
		}
		require.NotContains(t, string(doc), "token-", "the %s document seems to name a token", name)
	}
}

func TestAskedVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"serve", "--version"}, {"--log-level", "debug", "-version"}} {
		require.True(t, cli.AskedVersion(args), "%q", args)
	}
	for _, args := range [][]string{nil, {"serve"}, {"--versions"}, {"version"}, {"sms-log", "--", "--version"}} {
		require.False(t, cli.AskedVersion(args), "%q", args)
	}
	var out strings.Builder
	require.NoError(t, cli.PrintVersion(&out, "walletsvc"))
	require.Equal(t, buildinfo.Read().String("walletsvc")+"\n", out.String())
	require.Contains(t, out.String(), "walletsvc version ")
}
