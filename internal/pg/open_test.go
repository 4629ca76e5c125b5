package pg_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// A database that cannot be reached is named in the error, which is logged and printed at
// start: by its user, host, port, database and parameters, never by a password, in the
// URL's user part, as a parameter (password, sslpassword), or in a keyword/value string.
func TestOpenNamesAnUnreachableDatabaseWithoutItsPasswords(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr, port := ln.Addr().String(), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close()) // nothing listens there now
	for _, tc := range []struct{ name, url, shown string }{
		{"user part and sslpassword",
			"postgres://walletsaga:s3cret-user-part@" + addr + "/wallet?sslmode=disable&sslpassword=s3cret-ssl&connect_timeout=5",
			"postgres://walletsaga:xxxxx@" + addr + "/wallet?sslmode=disable&sslpassword=xxxxx&connect_timeout=5"},
		{"password parameter",
			"postgres://walletsaga@" + addr + "/wallet?sslmode=disable&password=s3cret-parameter",
			"postgres://walletsaga@" + addr + "/wallet?sslmode=disable&password=xxxxx"},
		{"keyword/value",
			"host=127.0.0.1 port=" + port + " user=walletsaga password='s3cret keyword' dbname=wallet sslmode=disable",
			"host=127.0.0.1 port=" + port + " user=walletsaga password=xxxxx dbname=wallet sslmode=disable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pg.Open(context.Background(), tc.url, pg.Options{MaxConns: 1})
			require.Error(t, err)
			require.NotContains(t, err.Error(), "s3cret")
			require.Contains(t, err.Error(), "database "+tc.shown+" unreachable")
		})
	}
}
