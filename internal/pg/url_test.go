package pg_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// ParseURL reads the host list as pgx does, also the forms net/url refuses (a port on a host
// before the last, IPv6 addresses among others), and the rest as net/url does: the names it
// finds are the hosts pgx would try, in order.
func TestParseURLReadsTheHostsPgxConnectsTo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url   string
		hosts []string
		names []string
	}{
		{"postgres://u:pw@127.0.0.1:55442/db?sslmode=disable", []string{"127.0.0.1:55442"}, []string{"127.0.0.1"}},
		{"postgres://u:pw@127.0.0.1:55442,127.0.0.1:55444/db?sslmode=disable&target_session_attrs=read-write",
			[]string{"127.0.0.1:55442", "127.0.0.1:55444"}, []string{"127.0.0.1", "127.0.0.1"}},
		{"postgresql://u:pw@db1.internal:5432,db2.internal/db?sslmode=disable", []string{"db1.internal:5432", "db2.internal"}, []string{"db1.internal", "db2.internal"}},
		{"postgres://u@[::1]:5432,[::1]:5433/db?sslmode=disable", []string{"[::1]:5432", "[::1]:5433"}, []string{"::1", "::1"}},
		{"postgres://u@db1.internal,[fd00::5]:5433?sslmode=disable", []string{"db1.internal", "[fd00::5]:5433"}, []string{"db1.internal", "fd00::5"}},
		{"postgres://localhost?sslmode=disable", []string{"localhost"}, []string{"localhost"}},
	} {
		u, err := pg.ParseURL(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.hosts, u.Hosts, tc.url)
		require.Equal(t, tc.names, u.Names(), tc.url)

		// pgx agrees: the same hosts, in the same order.
		c, err := pgconn.ParseConfig(tc.url)
		require.NoError(t, err, tc.url)
		targets := []string{net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))}
		for _, fb := range c.Fallbacks {
			targets = append(targets, net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port))))
		}
		var ours []string
		for i, h := range u.Names() {
			port := "5432"
			if _, p, err := net.SplitHostPort(u.Hosts[i]); err == nil && p != "" {
				port = p
			}
			ours = append(ours, net.JoinHostPort(h, port))
		}
		require.Equal(t, ours, targets, tc.url)
	}

	for _, bad := range []string{
		"mysql://u:pw@db/x",
		"postgres:db",
		"postgres://u:pw@db1:5432x/db",
		"postgres://u:pw@::1:5432/db",
		"postgres://u:pw@[::1:5432/db",
		"postgres://u:pw@[::1]x/db",
	} {
		_, err := pg.ParseURL(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "pw", "an error never quotes the URL")
	}
}

// A primary with a synchronous standby (synchronous_standby_names, synchronous_commit on)
// keeps what it acknowledges, on both; remote_write and remote_apply too. off, and local
// (which does not wait for the standby), can lose acknowledged commits, and so can fsync off.
func TestDurabilityNamesWhatCanLoseAcknowledgedCommits(t *testing.T) {
	t.Parallel()
	for _, sc := range []string{"on", "remote_write", "remote_apply"} {
		require.Empty(t, pg.Durability{Fsync: "on", SynchronousCommit: sc}.Unsafe(), sc)
	}
	for _, sc := range []string{"off", "local"} {
		require.Equal(t, []string{"synchronous_commit is " + sc + " (on, remote_write or remote_apply keep acknowledged commits)"},
			pg.Durability{Fsync: "on", SynchronousCommit: sc}.Unsafe(), sc)
	}
	require.Equal(t, []string{"fsync is off"}, pg.Durability{Fsync: "off", SynchronousCommit: "on"}.Unsafe())
}
