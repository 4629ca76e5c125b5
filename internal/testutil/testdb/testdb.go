// Package testdb gives each integration test a database of its own on the real Postgres:
// a copy (CREATE DATABASE … TEMPLATE) of a template database migrated once with the
// repository's migrations, dropped when the test ends. Tests can commit freely and run in
// parallel without seeing each other's rows. Copy, and Dump with Restore, take a backup of a
// test's database and restore it, for tests of what a restore does.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
	"github.com/walletsaga/walletsaga/migrations"
)

// New returns a pool on a fresh database with both services' schemas migrated (the wallet's
// and the notifier's, as the dev stack keeps them in one database) and its URL. The database
// is dropped at the end of the test.
func New(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return create(t, true)
}

// NewEmpty returns a pool on a fresh, empty database (no schema migrated) and its URL: for a
// service given a database of its own, or a migration test. It is dropped at the end of the
// test.
func NewEmpty(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	return create(t, false)
}

// Copy returns a pool on a new database copied (CREATE DATABASE … TEMPLATE) from the
// database at dbURL as it stands, and its URL: a backup of it, to restore in a test by using
// the copy. Nothing may be connected to the database at dbURL while it is copied: close its
// pools first. The copy is dropped at the end of the test.
func Copy(t testing.TB, dbURL string) (*pgxpool.Pool, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("testdb: copy: %v", err)
	}
	return createFrom(t, func(context.Context, *pgx.Conn, string) (string, error) {
		return strings.TrimPrefix(u.Path, "/"), nil
	})
}

// Dump backs the database at dbURL up as an operator does, with pg_dump (its custom
// format), while it is in use, and returns the archive's path, in the test's temporary
// directory. Restore takes it back.
func Dump(t testing.TB, dbURL string) string {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "backup.dump")
	pgTool(t, "pg_dump", dbURL, "--format=custom", "--file="+archive)
	return archive
}

// Restore restores archive (see Dump) as an operator does, with pg_restore into a new
// database, and returns a pool on it and its URL. The database is dropped at the end of the
// test.
func Restore(t testing.TB, archive string) (*pgxpool.Pool, string) {
	t.Helper()
	pool, dbURL := create(t, false)
	pgTool(t, "pg_restore", dbURL, "--exit-on-error", "--no-owner", archive)
	return pool, dbURL
}

// pgTool runs one of PostgreSQL's client programs (pg_dump, pg_restore) on the database at
// dbURL, with args. The program is the one on PATH, else the newest of Debian's
// /usr/lib/postgresql/<major>/bin (where scripts/services.sh finds the server's); the
// password goes in its environment, not its command line.
func pgTool(t testing.TB, name, dbURL string, args ...string) {
	t.Helper()
	testenv.SkipIfShort(t, "PostgreSQL")
	bin, err := exec.LookPath(name)
	if err != nil {
		found, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name))
		slices.SortFunc(found, func(a, b string) int { return majorOf(b) - majorOf(a) })
		if len(found) == 0 {
			testenv.Unavailable(t, "PostgreSQL's "+name, "PATH and /usr/lib/postgresql/*/bin", err)
			return
		}
		bin = found[0]
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("testdb: %s: %v", name, err)
	}
	env := os.Environ()
	if pw, ok := u.User.Password(); ok {
		env = append(env, "PGPASSWORD="+pw)
		u.User = url.User(u.User.Username())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--dbname=" + u.String()}, args...)...) //nolint:gosec // G204: PostgreSQL's own program, with the test's database and arguments
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testdb: %s: %v\n%s", name, err, out)
	}
}

// majorOf is the major version in a path /usr/lib/postgresql/<major>/bin/…, 0 if none.
func majorOf(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func create(t testing.TB, migrated bool) (*pgxpool.Pool, string) {
	t.Helper()
	return createFrom(t, func(ctx context.Context, admin *pgx.Conn, base string) (string, error) {
		if !migrated {
			return "template0", nil
		}
		tmpl, err := ensureTemplate(ctx, admin, base)
		if err != nil {
			return "", fmt.Errorf("template: %w", err)
		}
		return tmpl, nil
	})
}

// createFrom creates a database copied from the one source names, and returns a pool on it
// and its URL; the database is dropped at the end of the test.
func createFrom(t testing.TB, source func(ctx context.Context, admin *pgx.Conn, base string) (string, error)) (*pgxpool.Pool, string) {
	t.Helper()
	testenv.SkipIfShort(t, "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	base := testenv.DatabaseURL()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		testenv.Unavailable(t, "PostgreSQL", redact.URL(base), err)
		return nil, ""
	}
	defer admin.Close(context.Background()) //nolint:errcheck // closing an admin connection loses nothing

	tmpl, err := source(ctx, admin, base)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	name := "t_" + randHex(8)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, pgx.Identifier{tmpl}.Sanitize())); err != nil {
		t.Fatalf("testdb: create %s from %s: %v", name, tmpl, err)
	}
	dbURL := withDatabase(base, name)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testdb: pool: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("testdb: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx) //nolint:errcheck // closing an admin connection loses nothing
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("testdb: drop %s: %v", name, err)
		}
	})
	return pool, dbURL
}

// ensureTemplate creates and migrates, once per set of migration files, the template that
// test databases are copied from. An advisory lock serialises concurrent test binaries.
func ensureTemplate(ctx context.Context, admin *pgx.Conn, base string) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "tmpl_" + sum[:16]
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(74210001)"); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(74210001)") //nolint:errcheck // the lock also ends with the session
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS(SELECT 1 FROM pg_database WHERE datname=$1 AND datistemplate)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s", name)); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(base, name))
	if err != nil {
		return "", err
	}
	for _, seq := range []migrations.Sequence{migrations.Wallet, migrations.Notify} {
		if _, err = seq.Migrate(ctx, pool, nil); err != nil {
			break
		}
	}
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH is_template true", name)); err != nil {
		return "", err
	}
	return name, nil
}

func migrationsHash() (string, error) {
	h := sha256.New()
	for _, seq := range []migrations.Sequence{migrations.Wallet, migrations.Notify} {
		err := fs.WalkDir(seq.FS(), ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(seq.FS(), path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s/%s\x00%d\x00", seq.Name, path, len(b))
			h.Write(b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// LosingCancels returns a pool on dbURL (of at most maxConns connections) whose cancel
// requests never reach the server. When a context ends during a statement, pgx closes the
// connection and sends a cancel request on a new one; the server drops a cancel that lands
// while the backend is between protocol messages, which happens on a loaded machine. This
// pool loses every one, so a test sees at once what a lost cancel leaves behind: a statement
// that runs on after its client gave up. The pool is closed when the test ends.
func LosingCancels(t testing.TB, dbURL string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	cfg.MaxConns = maxConns
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cancelDropper{Conn: c}, nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// cancelDropper is a connection that spoils a cancel request written as its first message:
// it goes out with a secret key no backend has, so the server reads it, cancels nothing and
// closes the connection, as it does with a real cancel that came too early or too late.
type cancelDropper struct {
	net.Conn
	wrote bool
}

// cancelRequestCode is the protocol's CancelRequest code, after the message's length (16).
const cancelRequestCode = 80877102

func (c *cancelDropper) Write(b []byte) (int, error) {
	first := !c.wrote
	c.wrote = true
	if first && len(b) == 16 && binary.BigEndian.Uint32(b[0:4]) == 16 && binary.BigEndian.Uint32(b[4:8]) == cancelRequestCode {
		spoilt := slices.Clone(b)
		binary.BigEndian.PutUint32(spoilt[12:16], ^binary.BigEndian.Uint32(b[12:16]))
		return c.Conn.Write(spoilt)
	}
	return c.Conn.Write(b)
}

// WithPassfile returns dbURL with its password moved into a passfile of the test's own (the
// URL's passfile parameter, which pgx reads): production mode refuses a URL that holds the
// dev stack's documented password, so a test that runs a binary in production on the dev
// stack's Postgres hands it the password this way.
func WithPassfile(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("testdb: %s: %v", redact.URL(dbURL), err)
	}
	pw, ok := u.User.Password()
	if !ok {
		return dbURL
	}
	file := filepath.Join(t.TempDir(), "pgpass")
	escaped := strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(pw)
	if err := os.WriteFile(file, []byte("*:*:*:*:"+escaped+"\n"), 0o600); err != nil {
		t.Fatalf("testdb: passfile: %v", err)
	}
	u.User = url.User(u.User.Username())
	q := u.Query()
	q.Set("passfile", file)
	u.RawQuery = q.Encode()
	return u.String()
}
