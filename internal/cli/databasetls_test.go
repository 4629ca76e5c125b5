package cli_test

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/testutil/pgtlstest"
)

// What each sslmode verifies, tried on a real server: a PostgreSQL of the test's own that
// serves TLS with a certificate of a CA the test made, for the name localhost only
// (pgtlstest), opened through the pool the binaries open (Service.OpenPool). verify-full
// takes it only with that CA as sslrootcert and the name in the URL; require takes it
// trusting no CA, and verify-ca under a name it was not made for, so either would take an
// impostor too, which is why production refuses them without ALLOW_UNVERIFIED_DATABASE_TLS.
// The validator exempts loopback, so it is asked about the URLs the test connects with as
// they would be written for a remote server (db.internal).
func TestOnlyVerifyFullTellsTheDatabaseFromAnImpostor(t *testing.T) {
	t.Parallel()
	srv := pgtlstest.Start(t)
	open := func(t *testing.T, url string) (*pgxpool.Pool, error) {
		t.Helper()
		pool, err := cli.Service{Mode: cli.Production, DatabaseURL: url}.OpenPool(context.Background(), slog.New(slog.DiscardHandler), 2)
		if err == nil {
			t.Cleanup(pool.Close)
		}
		return pool, err
	}
	// encrypted checks that the server says the session is on TLS (its pg_hba.conf takes
	// nothing else, so a connection is one).
	encrypted := func(t *testing.T, pool *pgxpool.Pool) {
		t.Helper()
		var ssl bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl))
		require.True(t, ssl)
	}
	// validate checks url as production does, written for a remote server.
	validate := func(url, override string) string {
		remote := strings.Replace(url, "@"+pgtlstest.Name+":", "@db.internal:", 1)
		remote = strings.Replace(remote, "@127.0.0.1:", "@db.internal:", 1)
		return problems(func(p *cli.Problems) { p.CheckPostgresURL(cli.Production, "DATABASE_URL", remote, override) })
	}
	const reason = "the CA bundle is on order, private subnet meanwhile"

	t.Run("verify-full refuses a certificate of a CA it does not trust", func(t *testing.T) {
		t.Parallel()
		url := srv.URL(pgtlstest.Name, "sslmode=verify-full&sslrootcert="+srv.OtherCA)
		require.Empty(t, validate(url, ""), "production takes the URL: it is the server that fails")
		_, err := open(t, url)
		require.ErrorContains(t, err, "unreachable")
		require.ErrorContains(t, err, "certificate signed by unknown authority")
		var unknown x509.UnknownAuthorityError
		require.True(t, errors.As(err, &unknown), "%v", err)
	})
	t.Run("verify-full refuses a certificate made for another name", func(t *testing.T) {
		t.Parallel()
		_, err := open(t, srv.URL("127.0.0.1", "sslmode=verify-full&sslrootcert="+srv.CA))
		require.ErrorContains(t, err, "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs")
		var name x509.HostnameError
		require.True(t, errors.As(err, &name), "%v", err)
	})
	t.Run("verify-full connects with the CA and the name", func(t *testing.T) {
		t.Parallel()
		pool, err := open(t, srv.URL(pgtlstest.Name, "sslmode=verify-full&sslrootcert="+srv.CA))
		require.NoError(t, err)
		encrypted(t, pool)
	})
	t.Run("require connects trusting no CA", func(t *testing.T) {
		t.Parallel()
		url := srv.URL(pgtlstest.Name, "sslmode=require")
		pool, err := open(t, url)
		require.NoError(t, err, "no sslrootcert: whatever certificate the other end shows")
		encrypted(t, pool)
		require.Contains(t, validate(url, ""), "DATABASE_URL: reaches db.internal over the network with sslmode=require")
		require.Contains(t, validate(url, ""), "set ALLOW_UNVERIFIED_DATABASE_TLS to the reason in words")
		require.Empty(t, validate(url, reason), "the override takes it")

		// With sslrootcert, pgx checks the certificate as verify-ca does (as libpq): still no
		// name, so production holds it to the same rule.
		_, err = open(t, srv.URL(pgtlstest.Name, "sslmode=require&sslrootcert="+srv.OtherCA))
		require.ErrorContains(t, err, "certificate signed by unknown authority")
		require.Contains(t, validate(srv.URL(pgtlstest.Name, "sslmode=require&sslrootcert="+srv.CA), ""), "set ALLOW_UNVERIFIED_DATABASE_TLS")
	})
	t.Run("verify-ca connects under a name the certificate was not made for", func(t *testing.T) {
		t.Parallel()
		url := srv.URL("127.0.0.1", "sslmode=verify-ca&sslrootcert="+srv.CA)
		pool, err := open(t, url)
		require.NoError(t, err)
		encrypted(t, pool)
		require.Contains(t, validate(url, ""), "DATABASE_URL: reaches db.internal over the network with sslmode=verify-ca")
		require.Empty(t, validate(url, reason), "the override takes it")
	})
}
