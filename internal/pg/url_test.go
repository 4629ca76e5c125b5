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

// Param reads a parameter as pgx does, so that a check of the URL sees the setting pgx
// connects with: the last of a parameter given twice (net/url's Get takes the first), a query
// that goes on past a '#' (net/url ends it there), and ssl=true, which pgx takes for
// sslmode=require when it comes last. Each URL's sslmode is compared with the TLS pgx
// configures for it.
func TestParamIsTheSettingPgxConnectsWith(t *testing.T) {
	t.Parallel()
	// tlsOf names what pgx does for c's first host, as its sslmode would.
	tlsOf := func(c *pgconn.Config) string {
		switch tc := c.TLSConfig; {
		case tc == nil && len(c.Fallbacks) > 0 && c.Fallbacks[0].TLSConfig != nil:
			return "allow"
		case tc == nil:
			return "disable"
		case len(c.Fallbacks) > 0 && c.Fallbacks[0].TLSConfig == nil:
			return "prefer"
		case tc.VerifyPeerCertificate != nil:
			return "verify-ca"
		case tc.InsecureSkipVerify:
			return "require"
		default:
			return "verify-full"
		}
	}
	for url, want := range map[string]string{
		"postgres://u@db.internal/w?sslmode=verify-full":                                  "verify-full",
		"postgres://u@db.internal/w?sslmode=verify-full&sslmode=disable":                  "disable",
		"postgres://u@db.internal/w?sslmode=disable&sslmode=verify-full":                  "verify-full",
		"postgres://u@db.internal/w?sslmode=verify-full#&sslmode=disable":                 "disable",
		"postgres://u@db.internal/w?sslmode=verify-full&ssl%6Dode=prefer":                 "prefer",
		"postgres://u@db.internal/w?sslmode=verify-full&%20sslmode=allow":                 "verify-full",
		"postgres://u@db.internal/w?sslmode=verify-full&+sslmode=allow":                   "verify-full",
		"postgres://u@db.internal/w?sslmode=verify-full&ssl=true":                         "require",
		"postgres://u@db.internal/w?ssl=true&sslmode=verify-full":                         "verify-full",
		"postgres://u@db.internal/w?sslmode=verify-full&ssl=true&ssl=false":               "verify-full",
		"postgres://u@db.internal/w?sslmode=disable&ssl=true":                             "require",
		"postgres://u@db.internal/w?sslmode=verify-ca&application_name=a#b":               "verify-ca",
		"postgres://u:p%26w@db.internal/w?sslmode=allow&password=x%26sslmode%3Ddisable":   "allow",
		"postgres://u@db1.internal:5432,db2.internal/w?sslmode=require&sslmode=verify-ca": "verify-ca",
	} {
		u, err := pg.ParseURL(url)
		require.NoError(t, err, url)
		require.Equal(t, want, u.Param("sslmode"), url)
		c, err := pgconn.ParseConfig(url)
		require.NoError(t, err, url)
		require.Equal(t, want, tlsOf(c), "pgx: %s", url)
	}

	u, err := pg.ParseURL("postgres://u@localhost/w?host=/run/a&target_session_attrs=read-write&host=db.internal&target_session_attrs=standby#x")
	require.NoError(t, err)
	require.Equal(t, []string{"/run/a", "db.internal"}, u.Params("host"))
	require.Equal(t, "db.internal", u.Param("host"))
	require.Equal(t, "standby#x", u.Param("target_session_attrs"))
	require.Empty(t, u.Param("sslmode"))
	c, err := pgconn.ParseConfig("postgres://u@localhost/w?host=/run/a&host=db.internal")
	require.NoError(t, err)
	require.Equal(t, "db.internal", c.Host, "pgx connects to the last host parameter's")
}

// TestPasswordIsThePasswordPgxConnectsWith: the password the checks of a database URL read
// (a documented one refused, secrets kept distinct) is the one pgx connects with, however
// the URL gives it: a parameter given twice, one after a '#', one beside the user part.
func TestPasswordIsThePasswordPgxConnectsWith(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://u:own-secret@db.internal/w",
		"postgres://u@db.internal/w?password=own-secret",
		"postgres://u@db.internal/w?password=own-secret&password=walletsaga",
		"postgres://u@db.internal/w?password=own-secret#&password=walletsaga",
		"postgres://u:own-secret@db.internal/w?password=walletsaga",
		"postgres://u:walletsaga@db.internal/w?password=own-secret",
		"postgres://u@db1.internal,db2.internal/w?password=own-secret&password=walletsaga&target_session_attrs=read-write",
		"postgres://u@db.internal/w?pass%77ord=walletsaga",
	} {
		u, err := pg.ParseURL(url)
		require.NoError(t, err, url)
		c, err := pgconn.ParseConfig(url)
		require.NoError(t, err, url)
		require.Equal(t, c.Password, u.Password(), url)
	}
}
