package cli_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// The durability warning (dev, or an override) and the refusal to start (production) name
// the database by its user, host, port, database and parameters, never by a password. The
// URL asks for synchronous_commit=off for its own sessions, so the check finds the database
// unsafe whatever the server's own settings are; pgx reads sslpassword only to decrypt a
// client key, and there is none.
func TestDurabilityMessagesNameTheDatabaseWithoutItsPasswords(t *testing.T) {
	t.Parallel()
	testenv.SkipIfShort(t, "PostgreSQL")
	u, err := url.Parse(testenv.DatabaseURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("sslpassword", "s3cret-ssl-passphrase")
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	dbURL := u.String()

	t.Run("the warning", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		pool, err := cli.OpenDurablePool(context.Background(), cli.Dev, log, dbURL, pg.Options{MaxConns: 1}, "")
		if err != nil {
			testenv.Unavailable(t, "PostgreSQL", redact.URL(dbURL), err)
		}
		pool.Close()
		require.Contains(t, logs.String(), "can lose acknowledged commits")
		require.NotContains(t, logs.String(), "s3cret")
		require.Contains(t, logs.String(), "sslpassword=xxxxx")
	})
	t.Run("the refusal", func(t *testing.T) {
		t.Parallel()
		_, err := cli.OpenDurablePool(context.Background(), cli.Production, slog.New(slog.DiscardHandler), dbURL, pg.Options{MaxConns: 1}, "")
		require.ErrorContains(t, err, "refusing to start: the database ")
		require.NotContains(t, err.Error(), "s3cret")
		require.ErrorContains(t, err, "sslpassword=xxxxx")
	})
}

// A DATABASE_URL refused for its form is quoted with its passwords masked, whatever the
// form: a keyword/value string (which pgx takes, the binaries do not), another scheme.
func TestARefusedDatabaseURLIsQuotedWithoutItsPasswords(t *testing.T) {
	t.Parallel()
	for v, shown := range map[string]string{
		"host=db.internal user=wallet password=s3cret-kv dbname=wallet sslmode=verify-full": "host=db.internal user=wallet password=xxxxx dbname=wallet sslmode=verify-full",
		"mysql://wallet:s3cret-pw@db.internal/wallet?password=s3cret-param":                 "mysql://db.internal/wallet?password=xxxxx",
	} {
		got := problems(func(p *cli.Problems) { p.CheckPostgresURL(cli.Production, "DATABASE_URL", v, "") })
		require.Contains(t, got, "DATABASE_URL: must be a postgres:// URL with a host, got \""+shown+"\"", v)
		require.NotContains(t, got, "s3cret", v)
	}
}

// In production a database reached over the network is reached with sslmode=verify-full:
// require encrypts but lets anyone on the path pose as the server (it checks no certificate),
// and verify-ca lets any server with a certificate of the same CA pose as it (it checks no
// name). Either is taken only with ALLOW_UNVERIFIED_DATABASE_TLS stating the reason, which
// is then logged at every start; the override lowers nothing to plain text, and is refused
// where the URL does not need it. Dev and loopback are as before.
func TestProductionVerifiesTheServerOfARemoteDatabase(t *testing.T) {
	t.Parallel()
	const reason = "managed Postgres whose CA we have not obtained yet, private subnet"
	check := func(mode cli.Mode, v, override string) string {
		return problems(func(p *cli.Problems) { p.CheckPostgresURL(mode, "DATABASE_URL", v, override) })
	}
	for _, v := range []string{
		"postgres://w:pw-of-ours@db.internal:5432/w?sslmode=require",
		"postgres://w:pw-of-ours@10.0.0.5/w?sslmode=require&sslrootcert=/etc/ca.pem", // pgx: verify-ca
		"postgresql://w:pw-of-ours@db.internal/w?sslmode=verify-ca&sslrootcert=/etc/ca.pem",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&sslmode=verify-ca&sslrootcert=/etc/ca.pem",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&ssl=true", // pgx: require
		"postgres://w:pw-of-ours@localhost/w?host=db.internal&sslmode=require",
		"postgres://w:pw-of-ours@db1.internal,db2.internal/w?sslmode=verify-ca&target_session_attrs=read-write",
	} {
		u, err := pg.ParseURL(v)
		require.NoError(t, err)
		sslmode := u.Param("sslmode")

		got := check(cli.Production, v, "")
		require.Contains(t, got, "DATABASE_URL: reaches ", v)
		require.Contains(t, got, " over the network with sslmode="+sslmode+", which ", v)
		require.Contains(t, got, "production needs sslmode=verify-full in the URL, with sslrootcert=", v)
		require.Contains(t, got, "set ALLOW_UNVERIFIED_DATABASE_TLS to the reason in words", v)
		require.NotContains(t, got, "pw-of-ours", "the password is never echoed")

		require.Empty(t, check(cli.Production, v, reason), "the override takes it: %s", v)
		require.Empty(t, check(cli.Dev, v, ""), "dev: %s", v)

		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		cli.Service{Mode: cli.Production, DatabaseURL: v, UnverifiedDatabaseTLS: reason}.LogDatabaseTLS(log)
		require.Contains(t, logs.String(), "level=WARN msg=\"the database server is not verified: sslmode="+sslmode+" ", v)
		require.Contains(t, logs.String(), "running so as ALLOW_UNVERIFIED_DATABASE_TLS says", v)
		require.Contains(t, logs.String(), `reason="`+reason+`"`, v)
		require.Contains(t, logs.String(), `database="`+redact.URL(v)+`" hosts=`, v)
		require.NotContains(t, logs.String(), "pw-of-ours", "the password is never logged")
	}
	require.Contains(t, check(cli.Production, "postgres://w@db.internal/w?sslmode=require", ""), "sslmode=require, which encrypts but checks neither the server's certificate nor its name, so whoever sits on the path can pose as the server and read everything the service sends, the password included")
	require.Contains(t, check(cli.Production, "postgres://w@db.internal/w?sslmode=verify-ca", ""), "sslmode=verify-ca, which checks that the server's certificate comes from the CA of sslrootcert but not that it was made for this host, so any server holding a certificate of that CA can pose as it")

	// verify-full needs no override, and a URL that verifies its server, or reaches none over
	// the network, refuses one: it overrides nothing, and would hide a later downgrade.
	for _, v := range []string{
		"postgres://w:pw-of-ours@db.internal/w?sslmode=verify-full&sslrootcert=/etc/ca.pem",
		"postgres://w:pw-of-ours@db1.internal,db2.internal/w?sslmode=verify-full&sslrootcert=system&target_session_attrs=read-write",
		"postgres://w:pw-of-ours@db.internal/w?sslmode=require&sslmode=verify-full",
	} {
		require.Empty(t, check(cli.Production, v, ""), v)
		require.Contains(t, check(cli.Production, v, reason), "ALLOW_UNVERIFIED_DATABASE_TLS: is set, but DATABASE_URL verifies its server (sslmode=verify-full): leave it unset", v)
		var logs bytes.Buffer
		cli.Service{Mode: cli.Production, DatabaseURL: v}.LogDatabaseTLS(slog.New(slog.NewTextHandler(&logs, nil)))
		require.Empty(t, logs.String(), v)
	}
	for _, v := range []string{
		"postgres://w:pw-of-ours@127.0.0.1:5432/w?sslmode=disable",
		"postgres://w:pw-of-ours@localhost/w?sslmode=require",
		"postgres://w@localhost/w?host=/var/run/postgresql",
	} {
		require.Empty(t, check(cli.Production, v, ""), v)
		require.Contains(t, check(cli.Production, v, reason), "ALLOW_UNVERIFIED_DATABASE_TLS: is set, but DATABASE_URL reaches no host over the network (loopback or a Unix socket only): leave it unset", v)
		require.Empty(t, check(cli.Dev, v, reason), "dev: %s", v)
	}
	require.Empty(t, check(cli.Dev, cli.DevDatabaseURL, ""), "the dev stack's URL")

	// Nothing is logged in dev, where nothing is refused either.
	var logs bytes.Buffer
	cli.Service{Mode: cli.Dev, DatabaseURL: "postgres://w@db.internal/w?sslmode=require", UnverifiedDatabaseTLS: reason}.LogDatabaseTLS(slog.New(slog.NewTextHandler(&logs, nil)))
	require.Empty(t, logs.String())
}
