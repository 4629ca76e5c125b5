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
		got := problems(func(p *cli.Problems) { p.CheckPostgresURL(cli.Production, "DATABASE_URL", v) })
		require.Contains(t, got, "DATABASE_URL: must be a postgres:// URL with a host, got \""+shown+"\"", v)
		require.NotContains(t, got, "s3cret", v)
	}
}
