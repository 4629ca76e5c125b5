package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/walletsaga/walletsaga/internal/harness/procs"
)

// The DTM server the bench measures beside the product, built from its module's source at
// bench time (nothing of it is kept in this repository); the load goes through its HTTP client
// (github.com/dtm-labs/client, dtmcli, in go.mod).
const (
	dtmModule  = "github.com/dtm-labs/dtm"
	dtmVersion = "v1.19.0"
	// dtmSchema is DTM's own Postgres schema for its store, in its module.
	dtmSchema = "sqls/dtmsvr.storage.postgres.sql"
	// dtmBarrier is the branch barrier's table, for the equal-work phases.
	dtmBarrier = "sqls/dtmcli.barrier.postgres.sql"
)

// dtmBuild is a DTM server binary and its store's schema, cached under the run directory.
type dtmBuild struct {
	bin, schema, barrier string
}

// buildDTM returns DTM's server, built the first time into <runDir>/dtm-<version>/: its
// module source comes from the Go module proxy (go mod download), is copied to a temporary
// directory (the module cache is read-only) and built there with the bench's own Go.
func buildDTM(ctx context.Context, runDir string, log *slog.Logger) (dtmBuild, error) {
	dir, err := filepath.Abs(filepath.Join(runDir, "dtm-"+dtmVersion))
	if err != nil {
		return dtmBuild{}, err
	}
	b := dtmBuild{bin: filepath.Join(dir, "dtm"), schema: filepath.Join(dir, filepath.Base(dtmSchema)), barrier: filepath.Join(dir, filepath.Base(dtmBarrier))}
	if fileExists(b.bin) && fileExists(b.schema) && fileExists(b.barrier) {
		return b, nil
	}
	t0 := time.Now()
	tmp, err := os.MkdirTemp("", "bench-dtm-")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // a temporary directory: the system's to clean if this fails
	// Outside any module, so that nothing of this repository's go.mod is read or changed.
	out, err := goCommand(ctx, tmp, "mod", "download", "-json", dtmModule+"@"+dtmVersion)
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr != nil || mod.Dir == "" {
		return b, fmt.Errorf("go mod download %s@%s: %w %s%s", dtmModule, dtmVersion, err, mod.Error, out)
	}
	src := filepath.Join(tmp, "src")
	// CopyFS writes the copies with write permission, which the module cache's files lack.
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return b, fmt.Errorf("copying DTM's source: %w", err)
	}
	built := filepath.Join(tmp, "dtm")
	if out, err := goCommand(ctx, src, "build", "-ldflags", "-X main.Version="+dtmVersion, "-o", built, "."); err != nil {
		return b, fmt.Errorf("building DTM %s: %w\n%s", dtmVersion, err, out)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return b, err
	}
	for to, from := range map[string]string{b.schema: dtmSchema, b.barrier: dtmBarrier} {
		sql, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			return b, err
		}
		if err := os.WriteFile(to, sql, 0o600); err != nil { //nolint:gosec // G703: the path is the run directory's (-rundir), not the module's
			return b, err
		}
	}
	// The binary last, and whole: its presence says the cache is complete.
	if err := copyFile(built, b.bin+".tmp", 0o700); err != nil {
		return b, err
	}
	if err := os.Rename(b.bin+".tmp", b.bin); err != nil {
		return b, err
	}
	log.Info("bench: built DTM "+dtmVersion+" from its module source", "bin", b.bin, "took", time.Since(t0).Round(100*time.Millisecond))
	return b, nil
}

// goCommand runs the go command in dir with this run's settings left out (GOFLAGS, a
// workspace) and the toolchain the bench was built with (the Makefile's, already fetched;
// not one DTM's go.mod asks for), and returns its standard output (with its errors when it
// fails).
func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN="+runtime.Version())
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out = append(out, ee.Stderr...)
	}
	return out, err
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, mode) //nolint:gosec // G703: a path of the bench's own, under -rundir
}

// dtmServer is a running DTM server.
type dtmServer struct {
	URL  string // its HTTP API, http://127.0.0.1:<port>/api/dtmsvr
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// dtmStore is DTM's Postgres store: the server's STORE_* settings.
func dtmStore(dbURL string) (map[string]string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, err
	}
	pass, _ := u.User.Password()
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return map[string]string{
		"STORE_DRIVER": "postgres", "STORE_HOST": u.Hostname(), "STORE_PORT": port,
		"STORE_USER": u.User.Username(), "STORE_PASSWORD": pass, "STORE_DB": u.Path[1:],
	}, nil
}

// startDTM runs DTM's server bin on the store of dbURL with DTM's defaults, but for its ports
// (free ones: it takes fixed ports from its configuration, so they are chosen here) and its log
// level (warn, as the product's binaries run in the bench), and waits until it answers. Its
// configuration comes from the environment, DTM's own way (STORE_DRIVER for Store.Driver, …),
// and from nothing else: the bench's environment is not passed on.
func startDTM(ctx context.Context, bin, dbURL, logPath string) (*dtmServer, error) {
	env, err := dtmStore(dbURL)
	if err != nil {
		return nil, err
	}
	env["LOG_LEVEL"] = "warn"
	var last error
	// A port found free may be taken before DTM binds it: then DTM exits, and a second pair
	// of ports is tried.
	for range 3 {
		var ports [2]int
		for i := range ports {
			if ports[i], err = freePort(ctx); err != nil {
				return nil, err
			}
		}
		env["HTTP_PORT"], env["GRPC_PORT"] = strconv.Itoa(ports[0]), strconv.Itoa(ports[1])
		s, err := launchDTM(ctx, bin, logPath, env, ports[0])
		if err == nil {
			return s, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func launchDTM(ctx context.Context, bin, logPath string, env map[string]string, httpPort int) (*dtmServer, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "==== dtm %s start %s\n", dtmVersion, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin) //nolint:noctx // the server outlives ctx, which bounds only its start; Stop ends it
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// If the bench dies, so does the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start dtm: %w", err), out.Close())
	}
	s := &dtmServer{URL: fmt.Sprintf("http://127.0.0.1:%d/api/dtmsvr", httpPort), cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		_ = out.Close()
		close(s.done)
	}()
	ping := fmt.Sprintf("http://127.0.0.1:%d/api/ping", httpPort)
	deadline := time.Now().Add(procs.DefaultTimeout)
	for {
		if ok, _ := answers(ctx, ping); ok {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("dtm exited at start (%w); end of %s:\n%s", s.err, logPath, procs.Tail(logPath, 3000))
		case <-ctx.Done():
			_ = s.Stop(0)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Stop(0)
			return nil, fmt.Errorf("dtm did not answer %s within %s; end of %s:\n%s", ping, procs.DefaultTimeout, logPath, procs.Tail(logPath, 3000))
		}
	}
}

// answers reports whether GET url answers 200.
func answers(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK, nil
}

// freePort returns a loopback port no one listened on a moment ago.
func freePort(ctx context.Context) (int, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// Pid is the server's process id.
func (s *dtmServer) Pid() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to timeout, then SIGKILL.
func (s *dtmServer) Stop(timeout time.Duration) error {
	if timeout > 0 {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			return nil
		case <-time.After(timeout):
		}
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return nil
}
