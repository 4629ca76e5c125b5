// Package pgtlstest starts a throwaway PostgreSQL server of a test's own that serves TLS with
// a certificate the test's own CA made, for the name localhost only: what a client verifies
// of a database server (pgx's sslmode) can then be tried on a real one. The server is made
// with the PostgreSQL binaries scripts/services.sh uses (initdb, pg_ctl), in a directory of
// its own, listens on 127.0.0.1 at a free port, and is stopped and deleted when the test
// ends. Without the binaries the test fails under CI or WALLETSAGA_REQUIRE_SERVICES=1 and
// is skipped otherwise (testenv), as a test missing the dev stack is.
package pgtlstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/walletsaga/walletsaga/internal/testutil/testenv"
)

// Name is the one name the server's certificate is made for: a URL must name the server so
// for sslmode=verify-full to take it (127.0.0.1, the same server, is not in the certificate).
const Name = "localhost"

// Server is a running throwaway PostgreSQL that takes only TLS connections (hostssl), from
// user postgres without a password, to database postgres.
type Server struct {
	// Port is the port it listens on, on 127.0.0.1.
	Port int
	// CA is the PEM file of the CA that signed the server's certificate (an sslrootcert that
	// verifies it); OtherCA that of a CA that signed nothing of the server's.
	CA, OtherCA string
}

// URL is a URL of the server as host (Name, or an address of it), with the query params
// (sslmode and the like).
func (s *Server) URL(host, params string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?%s&connect_timeout=10", net.JoinHostPort(host, strconv.Itoa(s.Port)), params)
}

// Start starts a server for t, stopped and deleted when t ends.
func Start(t *testing.T) *Server {
	t.Helper()
	const service = "PostgreSQL's binaries (initdb, pg_ctl)"
	testenv.SkipIfShort(t, service)
	bin, err := binDir()
	if err != nil {
		testenv.Unavailable(t, service, "/usr/lib/postgresql/*/bin or $PATH", err)
	}
	owner, err := serverUser()
	if err != nil {
		testenv.Unavailable(t, service, "the postgres user", err)
	}
	// Not t.TempDir: the server runs as postgres when the test runs as root, and postgres
	// cannot enter the test's temporary directories.
	dir, err := os.MkdirTemp("", "walletsaga-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := owner.chown(dir); err != nil {
		t.Fatal(err)
	}
	s := &Server{CA: filepath.Join(dir, "ca.pem"), OtherCA: filepath.Join(dir, "other-ca.pem")}
	if err := writeCerts(dir, owner, s.CA, s.OtherCA); err != nil {
		t.Fatal(err)
	}

	data := filepath.Join(dir, "data")
	// Each command is bounded on its own: the test's context ends before its clean-ups, and
	// one of them stops the server.
	run := func(name string, args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...) //nolint:gosec // G204: the test's own PostgreSQL binaries and arguments
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
		cmd.SysProcAttr = owner.attr()
		return cmd.CombinedOutput()
	}
	if out, err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
ssl = on
ssl_cert_file = '%s'
ssl_key_file = '%s'
max_connections = 20
shared_buffers = 16MB
`, dir, filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err := appendFile(filepath.Join(data, "postgresql.conf"), conf); err != nil {
		t.Fatal(err)
	}
	// TLS only: a connection in plain text finds no line that takes it.
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := owner.chown(filepath.Join(data, "pg_hba.conf")); err != nil {
		t.Fatal(err)
	}

	// Stopped before its directory is deleted, also after a start that failed half-way.
	started := false
	t.Cleanup(func() {
		if out, err := run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil && started {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	// A port free a moment ago may be taken before the server binds it: another port then.
	log := filepath.Join(dir, "postgres.log")
	for attempt := 1; !started; attempt++ {
		if s.Port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		out, err := run("pg_ctl", "-D", data, "-l", log, "-o", "-p "+strconv.Itoa(s.Port), "-w", "-t", "60", "start")
		started = err == nil
		if !started && attempt == 3 {
			logged, _ := os.ReadFile(log) //nolint:gosec // G304: the server's log, in the test's directory
			t.Fatalf("pg_ctl start: %v\n%s\n---- %s ----\n%s", err, out, log, logged)
		}
	}
	return s
}

// binDir finds the directory of initdb and pg_ctl as scripts/services.sh does: the first
// of /usr/lib/postgresql/*/bin that holds initdb, else initdb's on $PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("no initdb in /usr/lib/postgresql/*/bin nor on $PATH")
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// account is the user the server runs as: the test's own, or postgres when the test runs as
// root (initdb and postgres refuse to run as root).
type account struct {
	root     bool
	uid, gid int
}

func serverUser() (account, error) {
	if os.Geteuid() != 0 {
		return account{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return account{}, fmt.Errorf("running as root, the server needs the user postgres to run as (`make services` creates it): %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return account{}, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return account{}, err
	}
	return account{root: true, uid: uid, gid: gid}, nil
}

func (a account) chown(path string) error {
	if !a.root {
		return nil
	}
	return os.Chown(path, a.uid, a.gid)
}

func (a account) attr() *syscall.SysProcAttr {
	if !a.root {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}} //nolint:gosec // G115: ids from /etc/passwd
}

// writeCerts writes into dir the CA's certificate (caFile), another CA's (otherFile), and the
// server's certificate for Name, signed by the CA, and its key, which the server's user owns
// and alone may read (PostgreSQL refuses a key others can read).
func writeCerts(dir string, owner account, caFile, otherFile string) error {
	ca, caKey, err := newCA("walletsaga test CA")
	if err != nil {
		return err
	}
	other, _, err := newCA("walletsaga test CA, another")
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: Name},
		DNSNames:     []string{Name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "server.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{caFile, "CERTIFICATE", ca.Raw, 0o644},
		{otherFile, "CERTIFICATE", other.Raw, 0o644},
		{filepath.Join(dir, "server.crt"), "CERTIFICATE", der, 0o644},
		{keyFile, "PRIVATE KEY", pkcs8, 0o600},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return err
		}
	}
	return owner.chown(keyFile)
}

// newCA makes a self-signed CA named name.
func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0) //nolint:gosec // G304: the test's own cluster's file
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// freePort returns a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}
