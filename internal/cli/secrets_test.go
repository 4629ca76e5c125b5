package cli_test

import (
	"bytes"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/redact"
)

// problems returns what check adds to an empty list, as one string ("" for nothing).
func problems(check func(p *cli.Problems)) string {
	var p cli.Problems
	check(&p)
	if err := p.Err(); err != nil {
		return err.Error()
	}
	return ""
}

func TestTokensAreCheckedForLengthDocumentedValuesAndEntropy(t *testing.T) {
	t.Parallel()
	check := func(mode cli.Mode, v string, required bool) string {
		return problems(func(p *cli.Problems) { p.CheckToken(mode, "T", v, required) })
	}
	require.Contains(t, check(cli.Production, "", true), "T: required")
	require.Empty(t, check(cli.Production, "", false))
	require.Contains(t, check(cli.Production, "short", false), "at least 16")
	for _, v := range cli.DocumentedSecrets {
		if len(v) >= cli.MinTokenLen {
			require.Contains(t, check(cli.Production, v, true), "T: is a secret the repository documents", v)
		}
	}
	require.Contains(t, check(cli.Production, "walletsaga-demo-admin-token", false), "the repository documents", "a value of a documented family")
	require.Empty(t, check(cli.Dev, "walletsaga-dev-service-token", true), "dev accepts its own tokens")
	for _, weak := range []string{"aaaaaaaaaaaaaaaaaaaa", "1234567890123456", "abababababababababababab", "passwordpassword"} {
		got := check(cli.Production, weak, true)
		require.Contains(t, got, "T: is too predictable", weak)
		require.NotContains(t, got, weak, "the value is never echoed")
		require.Empty(t, check(cli.Dev, weak, true), "dev only checks the length: %s", weak)
	}
	for _, strong := range []string{"a-real-secret-of-32-characters!!", "Xk9#mP2$vL8qR4tZ", "q7Fh2LwZ0xYp9BvT3nKcR8dS"} {
		require.Empty(t, check(cli.Production, strong, true), strong)
	}
	require.InDelta(t, 0, cli.SecretBits("aaaaaaaaaaaaaaaaaaaa"), 1e-9)
	require.InDelta(t, 52, cli.SecretBits("1234567890123456"), 1e-9, "16 characters, 10 of them, 6 twice: 3.25 bits each")
	require.InDelta(t, 64, cli.SecretBits("Xk9#mP2$vL8qR4tZ"), 1e-9, "16 different characters: 4 bits each, the most 16 can score")
}

// A documented secret is refused in any case: a password that differs from the README's
// only by its capitals is the next guess of whoever read it.
func TestDocumentedSecretsAreRefusedInAnyCase(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"Walletsaga-Dev-Service-Token", "WALLETSAGA-DEV-SERVICE-TOKEN", "WalletSaga", "Walletsaga-Demo-Anything", "CHANGE-ME-AT-LEAST-16"} {
		require.True(t, cli.IsDocumentedSecret(v), v)
	}
	require.False(t, cli.IsDocumentedSecret("a-real-secret-of-32-characters!!"))
	for _, v := range cli.DocumentedSecrets {
		require.Equal(t, strings.ToLower(v), v, "listed in lower case, as IsDocumentedSecret compares")
	}
	got := problems(func(p *cli.Problems) {
		p.CheckToken(cli.Production, "SERVICE_TOKEN", "Walletsaga-Dev-Service-Token", true)
	})
	require.Contains(t, got, "SERVICE_TOKEN: is a secret the repository documents")
	got = problems(func(p *cli.Problems) {
		p.CheckPostgresURL(cli.Production, "DATABASE_URL", "postgres://walletsaga:WalletSaga@127.0.0.1:55432/walletsaga?sslmode=disable", "")
	})
	require.Contains(t, got, "DATABASE_URL: holds a password the repository documents")
	// However the URL hides it from net/url: pgx connects with the last password parameter,
	// and reads past a '#'.
	for _, hidden := range []string{"?password=own-secret-1234&password=walletsaga", "?password=own-secret-1234#&password=walletsaga"} {
		got = problems(func(p *cli.Problems) {
			p.CheckPostgresURL(cli.Production, "DATABASE_URL", "postgres://walletsaga@127.0.0.1:55432/walletsaga"+hidden, "")
		})
		require.Contains(t, got, "DATABASE_URL: holds a password the repository documents", hidden)
	}
}

func TestSecretsOfABinaryMustDiffer(t *testing.T) {
	t.Parallel()
	secrets := func(a, b, c string) []cli.NamedSecret {
		return []cli.NamedSecret{{Field: "SERVICE_TOKEN", Value: a}, {Field: "MERCHANT_TOKEN", Value: b}, {Field: "ROCKETMQ_SECRET_KEY", Value: c}}
	}
	distinct := func(mode cli.Mode, s []cli.NamedSecret) string {
		return problems(func(p *cli.Problems) { p.CheckDistinct(mode, s...) })
	}
	const same = "one-value-for-two-purposes"
	got := distinct(cli.Production, secrets(same, "another-value-entirely", same))
	require.Contains(t, got, "ROCKETMQ_SECRET_KEY: must differ from SERVICE_TOKEN", "both settings named")
	require.NotContains(t, got, same, "the value is never echoed")
	require.Equal(t, 1, strings.Count(got, "must differ"))
	require.Equal(t, 2, strings.Count(distinct(cli.Production, secrets(same, same, same)), "must differ"), "each repeat once")
	require.Empty(t, distinct(cli.Production, secrets("first-value-of-them", "", "")), "unset secrets are not equal to each other")
	require.Contains(t, distinct(cli.Dev, secrets(same, same, "")), "MERCHANT_TOKEN: must differ from SERVICE_TOKEN", "in dev too")
	require.Empty(t, distinct(cli.Dev, secrets("x", "walletsaga-dev-provider-token", "walletsaga-dev-provider-token")),
		"in dev the documented values are shared on purpose")
	require.Contains(t, distinct(cli.Production, secrets("x", "walletsaga-dev-provider-token", "walletsaga-dev-provider-token")), "must differ")
}

func TestProductionSignsItsBrokerRequestsUnlessTheNetworkIsNamed(t *testing.T) {
	t.Parallel()
	broker := func(mode cli.Mode, serving bool, access, secret, unsigned string) string {
		return problems(func(p *cli.Problems) { p.CheckBroker(mode, serving, access, secret, unsigned) })
	}
	const secret = "q7Fh2LwZ0xYp9BvT3nKcR8dS"
	got := broker(cli.Production, true, "", "", "")
	require.Contains(t, got, "ROCKETMQ_ACCESS_KEY: required in production")
	require.Contains(t, got, "ALLOW_UNSIGNED_BROKER", "says how to run without, on purpose")
	require.Empty(t, broker(cli.Production, false, "", "", ""), "migrate needs no broker")
	require.Empty(t, broker(cli.Dev, true, "", "", ""), "dev warns only")
	require.Empty(t, broker(cli.Production, true, "walletsvc-prod", secret, ""))
	require.Empty(t, broker(cli.Production, true, "", "", "private network: only the brokers, walletsvc and notifier reach 9876 and 10911"))
	require.Contains(t, broker(cli.Production, true, "", "", "yes"), "ALLOW_UNSIGNED_BROKER: must state the reason in words")
	require.Contains(t, broker(cli.Production, true, "walletsvc-prod", secret, "private network only"), "ALLOW_UNSIGNED_BROKER: is set, but ROCKETMQ_ACCESS_KEY signs")
	require.Contains(t, broker(cli.Production, true, "walletsvc-prod", "", ""), "ROCKETMQ_SECRET_KEY: required with ROCKETMQ_ACCESS_KEY")
	require.Contains(t, broker(cli.Production, true, "", secret, ""), "ROCKETMQ_ACCESS_KEY: required with ROCKETMQ_SECRET_KEY")
	require.Contains(t, broker(cli.Production, true, "walletsvc", "walletsaga-dev-walletsvc-secret", ""), "ROCKETMQ_SECRET_KEY: is a secret the repository documents")
	require.Contains(t, broker(cli.Production, true, "walletsvc-prod", "1234567890123456", ""), "ROCKETMQ_SECRET_KEY: is too predictable")
	require.Empty(t, broker(cli.Dev, true, "walletsvc", "walletsaga-dev-walletsvc-secret", ""))

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cli.LogBroker(log, cli.Production, "", "private network: only our hosts reach the broker")
	require.Contains(t, logs.String(), "private network: only our hosts reach the broker", "the stated boundary is logged")
	logs.Reset()
	cli.LogBroker(log, cli.Production, "walletsvc-prod", "")
	require.Empty(t, logs.String(), "signed: nothing to say")
}

func TestDatabaseURLsComeFromTheEnvironmentOrAFileAndTheirPasswordsNeverFromAFlag(t *testing.T) {
	t.Parallel()
	const (
		withPassword = "postgres://wallet:a-db-password-of-ours@db.internal:5432/wallet?sslmode=verify-full"
		noPassword   = "postgres://wallet@db.internal:5432/wallet?sslmode=verify-full"
	)
	file := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(file, []byte(withPassword+"\n"), 0o600))
	parse := func(mode cli.Mode, env map[string]string, args ...string) (string, string) {
		f := cli.NewFlags("x", mode, func(k string) string { return env[k] }, io.Discard)
		var url string
		f.DatabaseURL(&url, "NOTIFY_DATABASE_URL", "DATABASE_URL", "postgres://dev", true, "db")
		require.NoError(t, f.Parse(args))
		if err := f.Err(); err != nil {
			return url, err.Error()
		}
		return url, ""
	}
	url, err := parse(cli.Production, map[string]string{"NOTIFY_DATABASE_URL": withPassword})
	require.Empty(t, err)
	require.Equal(t, withPassword, url, "from the environment")
	url, err = parse(cli.Production, map[string]string{"NOTIFY_DATABASE_URL_FILE": file})
	require.Empty(t, err)
	require.Equal(t, withPassword, url, "from the file, trimmed")
	url, err = parse(cli.Production, nil, "--notify-database-url-file", file)
	require.Empty(t, err)
	require.Equal(t, withPassword, url, "from the file named on the command line")
	url, err = parse(cli.Production, map[string]string{"DATABASE_URL_FILE": file})
	require.Empty(t, err)
	require.Equal(t, withPassword, url, "from the fallback's file")
	url, err = parse(cli.Production, map[string]string{"DATABASE_URL": noPassword, "NOTIFY_DATABASE_URL": withPassword})
	require.Empty(t, err)
	require.Equal(t, withPassword, url, "its own before the fallback")
	url, err = parse(cli.Production, nil, "--notify-database-url", noPassword)
	require.Empty(t, err)
	require.Equal(t, noPassword, url, "a URL without a password may be a flag")

	_, err = parse(cli.Production, nil, "--notify-database-url", withPassword)
	require.Contains(t, err, "NOTIFY_DATABASE_URL: a URL holding a password is not accepted on the command line")
	require.NotContains(t, err, "a-db-password-of-ours", "never echoed")
	_, err = parse(cli.Dev, nil, "--notify-database-url", "postgres://u@localhost/db?password=a-db-password-of-ours")
	require.Contains(t, err, "not accepted on the command line", "in every mode, and as a parameter too")
	_, err = parse(cli.Dev, nil, "--notify-database-url", "postgres://u:a-db-password-of-ours@db1:5432,db2/db?target_session_attrs=read-write")
	require.Contains(t, err, "not accepted on the command line", "and in a URL of several hosts")
	_, err = parse(cli.Production, map[string]string{"NOTIFY_DATABASE_URL": noPassword, "NOTIFY_DATABASE_URL_FILE": file})
	require.Contains(t, err, "NOTIFY_DATABASE_URL: set both")
	_, err = parse(cli.Production, map[string]string{"NOTIFY_DATABASE_URL_FILE": filepath.Join(t.TempDir(), "missing")})
	require.Contains(t, err, "NOTIFY_DATABASE_URL_FILE")
	_, err = parse(cli.Production, nil)
	require.Contains(t, err, "NOTIFY_DATABASE_URL: required (set NOTIFY_DATABASE_URL or NOTIFY_DATABASE_URL_FILE, or DATABASE_URL or DATABASE_URL_FILE)")
	url, err = parse(cli.Dev, nil)
	require.Empty(t, err)
	require.Equal(t, "postgres://dev", url, "the dev default")
}

func TestProductionReachesARemoteDatabaseOverTLSOnly(t *testing.T) {
	t.Parallel()
	check := func(mode cli.Mode, v string) string {
		return problems(func(p *cli.Problems) { p.CheckPostgresURL(mode, "DATABASE_URL", v, "") })
	}
	for _, ok := range []string{
		"postgres://w:pw-of-ours@127.0.0.1:5432/w?sslmode=disable", // loopback: a sidecar or the same host
		"postgres://w:pw-of-ours@localhost/w",
		"postgres://w:pw-of-ours@[::1]:5432/w?sslmode=disable",
		"postgres://w@localhost/w?host=/var/run/postgresql", // a Unix socket
		"postgres://w:pw-of-ours@10.0.0.5/w?sslmode=verify-full&sslrootcert=/etc/ca.pem",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&sslrootcert=system",
	} {
		require.Empty(t, check(cli.Production, ok), ok)
	}
	for v, want := range map[string]string{
		"postgres://w:pw-of-ours@db.internal:5432/w?sslmode=disable": "db.internal over the network, so production needs sslmode=verify-full",
		"postgres://w:pw-of-ours@db.internal:5432/w":                 "got no sslmode",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=prefer":       "got sslmode=prefer",
		"postgres://w:pw-of-ours@localhost/w?host=db.internal":       "db.internal over the network",
		"postgres://w:pw-of-ours@10.0.0.5/w?sslmode=allow":           "10.0.0.5 over the network",
		// pgx takes the last of a parameter given twice, and reads the query past a '#'
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&sslmode=disable":         "got sslmode=disable",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full#&sslmode=prefer":         "got sslmode=prefer",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&ssl%6Dode=allow":         "got sslmode=allow",
		"postgres://w:pw-of-ours@localhost/w?host=/run/pg&sslmode=disable&host=db.internal": "db.internal over the network",
	} {
		got := check(cli.Production, v)
		require.Contains(t, got, "DATABASE_URL: reaches ", v)
		require.Contains(t, got, want, v)
		require.NotContains(t, got, "pw-of-ours", "the password is never echoed")
		require.Empty(t, check(cli.Dev, v), "dev: %s", v)
		require.Contains(t, problems(func(p *cli.Problems) {
			p.CheckPostgresURL(cli.Production, "DATABASE_URL", v, "the override is for TLS that is not verified")
		}),
			"DATABASE_URL: reaches ", "no override takes plain text: %s", v)
	}
	require.Contains(t, check(cli.Production, "postgres://walletsaga:walletsaga@127.0.0.1:55432/walletsaga?sslmode=disable"),
		"DATABASE_URL: holds a password the repository documents")
	require.Contains(t, check(cli.Production, "mysql://x"), "must be a postgres:// URL")
}

// A cluster with a standby is reached through all its nodes with target_session_attrs=
// read-write, which connects to the primary only: in every mode a URL of several hosts needs
// it, and no URL may ask for a standby, which refuses every write. Each node reached over the
// network is held to production's TLS rule, and a password among several hosts is found (and
// never echoed) as in a URL of one.
func TestADatabaseURLOfSeveralHostsConnectsToThePrimaryOnly(t *testing.T) {
	t.Parallel()
	check := func(mode cli.Mode, v string) string {
		return problems(func(p *cli.Problems) { p.CheckPostgresURL(mode, "DATABASE_URL", v, "") })
	}
	for _, ok := range []string{
		"postgres://w:pw-of-ours@127.0.0.1:55442,127.0.0.1:55444/w?sslmode=disable&target_session_attrs=read-write",
		"postgres://w:pw-of-ours@db1.internal:5432,db2.internal/w?sslmode=verify-full&target_session_attrs=read-write",
		"postgres://w:pw-of-ours@[::1]:5432,[::1]:5433/w?target_session_attrs=primary",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&target_session_attrs=read-write",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&target_session_attrs=any",
	} {
		require.Empty(t, check(cli.Production, ok), ok)
		require.Empty(t, check(cli.Dev, ok), ok)
	}
	for v, want := range map[string]string{
		"postgres://w:pw-of-ours@127.0.0.1:55442,127.0.0.1:55444/w?sslmode=disable":             "names 2 hosts, so it needs target_session_attrs=read-write",
		"postgres://w:pw-of-ours@127.0.0.1:55442,127.0.0.1:55444/w?target_session_attrs=any":    "names 2 hosts, so it needs target_session_attrs=read-write",
		"postgres://w:pw-of-ours@localhost/w?host=/run/a,/run/b":                                "names 2 hosts",
		"postgres://w:pw-of-ours@127.0.0.1/w?target_session_attrs=standby":                      "target_session_attrs=standby lets pgx connect to a standby",
		"postgres://w:pw-of-ours@127.0.0.1:1,127.0.0.1:2/w?target_session_attrs=prefer-standby": "target_session_attrs=prefer-standby lets pgx connect to a standby",
		"postgres://w:pw-of-ours@127.0.0.1:1,127.0.0.1:2/w?target_session_attrs=read-only":      "target_session_attrs=read-only lets pgx connect to a standby",
		"postgres://w:pw-of-ours@127.0.0.1:5432x,127.0.0.1:2/w?target_session_attrs=read-write": "must be a postgres:// URL with a host, got \"postgres://w:xxxxx@127.0.0.1:5432x,127.0.0.1:2/w?target_session_attrs=read-write\"",
		"postgres://w:pw-of-ours@/w?target_session_attrs=read-write":                            "must be a postgres:// URL with a host",
		// pgx takes the last of a parameter given twice
		"postgres://w:pw-of-ours@127.0.0.1:1,127.0.0.1:2/w?target_session_attrs=read-write&target_session_attrs=standby":  "target_session_attrs=standby lets pgx connect to a standby",
		"postgres://w:pw-of-ours@127.0.0.1/w?target_session_attrs=read-write&host=/run/a,/run/b&target_session_attrs=any": "names 2 hosts",
	} {
		for _, mode := range []cli.Mode{cli.Dev, cli.Production} {
			got := check(mode, v)
			require.Contains(t, got, "DATABASE_URL: ", v)
			require.Contains(t, got, want, v)
			require.NotContains(t, got, "pw-of-ours", "the password is never echoed")
		}
	}
	got := check(cli.Production, "postgres://w:pw-of-ours@127.0.0.1:5432,db2.internal:5432/w?sslmode=prefer&target_session_attrs=read-write")
	require.Contains(t, got, "reaches db2.internal over the network", "every node is held to the rule")
	got = check(cli.Production, "postgres://w:pw-of-ours@127.0.0.1:5432,db2.internal:5432/w?sslmode=require&target_session_attrs=read-write")
	require.Contains(t, got, "reaches db2.internal over the network with sslmode=require", "every node is verified")
	require.Contains(t, check(cli.Production, "postgres://walletsaga:walletsaga@127.0.0.1:55442,127.0.0.1:55444/walletsaga?sslmode=disable&target_session_attrs=read-write"),
		"holds a password the repository documents")
	require.Equal(t, "pw-of-ours", cli.URLPassword("postgres://w:pw-of-ours@db1:5432,db2/w"), "net/url refuses this host list; pgx takes it")
	require.Equal(t, "postgres://w:xxxxx@db1:5432,[fd00::5]/w", redact.URL("postgres://w:pw-of-ours@db1:5432,[fd00::5]/w"))
}

// documentedValue finds the secret values a file hands out: the dev, demo and bench
// families anywhere, and in documentation, configuration and scripts any literal given to a
// setting named like a secret (NAME=value, NAME: value, "password":"value",
// ${NAME:-value}) or written as a URL's password.
var (
	familyValue   = regexp.MustCompile(`\bwalletsaga-(?:dev|demo|bench)-[A-Za-z0-9-]*[A-Za-z0-9]|\bchange-me[A-Za-z0-9-]*`)
	secretName    = `[A-Za-z0-9_]*(?i:token|secret|password|secret_?key|passwd)`
	assignedValue = []*regexp.Regexp{
		regexp.MustCompile(`\b` + secretName + "=[\"']?([^\\s\"'$<>{}()…;`]+)(?:[\"'\\s;`]|$)"),       // NAME=value (a backtick ends a Markdown code span)
		regexp.MustCompile(`(?m)^\s*` + secretName + `:\s*["']?([^\s"'$<>{}()…#]+)["']?\s*(?:#.*)?$`), // NAME: value (YAML)
		regexp.MustCompile(`"` + secretName + `"\s*:\s*"([^"$]+)"`),                                   // "password":"value"
		regexp.MustCompile(`\$\{` + secretName + `:-([^}$]+)\}`),                                      // ${NAME:-value}
		regexp.MustCompile(`postgres(?:ql)?://[^:/@\s]+:([^@\s$]+)@`),                                 // a URL's password
	}
)

// docFile reports whether a file is documentation, configuration or a script: every
// pattern applies to it; to Go sources only the families do.
func docFile(path string) bool {
	switch filepath.Ext(path) {
	case ".md", ".yml", ".yaml", ".conf", ".properties", ".sh", ".env", ".toml":
		return true
	}
	return slices.Contains([]string{"Makefile", "Dockerfile", "run"}, filepath.Base(path))
}

// Every secret value the repository hands out — in its docs, the compose file, the broker's
// configuration, the scripts, and the defaults in its Go sources — is one production refuses
// by name: it is in cli.DocumentedSecrets, so the list cannot fall behind the documents.
func TestEveryDocumentedSecretIsListed(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	found := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") && name != ".ci" || slices.Contains([]string{"third_party", "bin", "node_modules"}, name)) {
				return filepath.SkipDir
			}
			return nil
		}
		isGo := strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
		if !isGo && !docFile(path) {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // G122: the repository's own files
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var values []string
		values = append(values, familyValue.FindAllString(string(b), -1)...)
		if !isGo {
			for _, re := range assignedValue {
				for _, m := range re.FindAllStringSubmatch(string(b), -1) {
					values = append(values, m[1])
				}
			}
		}
		for _, v := range values {
			found[v] = append(found[v], rel)
		}
		return nil
	})
	require.NoError(t, err)
	for v, files := range found {
		if v == redact.Mask {
			continue // a password as the reference shows it: masked
		}
		require.True(t, slices.Contains(cli.DocumentedSecrets, v), "%q, in %s, is not in cli.DocumentedSecrets", v, strings.Join(slices.Compact(files), ", "))
	}
	// The reading finds what it must: the Postgres password (compose, a URL), a broker
	// secret (services.sh's ${…:-…}, tools.yml, broker.conf's JSON) and the tokens.
	for _, v := range []string{"walletsaga", "walletsaga-dev-admin-secret", "walletsaga-dev-service-token", "walletsaga-demo-read-token", "walletsaga-bench-read-token"} {
		require.Contains(t, found, v)
	}
	require.Contains(t, found["walletsaga"], "docker-compose.yml")
	require.Contains(t, found["walletsaga-dev-admin-secret"], filepath.Join("deploy", "rocketmq", "tools.yml"))
}
