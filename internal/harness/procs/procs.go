// Package procs runs the product's programs the way an operator does, for the tests, the
// benchmark and the chaos run: as operating-system processes (Start: an environment, a log
// file, SIGTERM or SIGKILL), or, for a binary's own tests, as its run function inside the
// test (StartFunc). Either way it waits until the program answers over HTTP.
//
// The harness never picks a port: a program is started with HTTP_ADDR=127.0.0.1:0 (unless
// told an address), binds a port of its own, and writes the address it bound to the file
// named by HTTP_ADDR_FILE, which the harness reads. No port is closed and then handed out,
// so programs started at once, by parallel tests or by other sessions, can never be given
// the same one.
package procs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Default readiness: the path polled and how long a start may take.
const (
	DefaultReady   = "/healthz"
	DefaultTimeout = 60 * time.Second
)

// pollEvery is how often a start checks for the address file and the ready path.
const pollEvery = 50 * time.Millisecond

// Spec says how to start one process.
type Spec struct {
	Name string            // for messages
	Bin  string            // path of the binary
	Args []string          // arguments
	Env  map[string]string // added to this process's environment
	// Addr is the process's HTTP_ADDR. Empty: 127.0.0.1:0, a port the process binds itself;
	// a process restarted in the place of another can be given the address that one had.
	Addr string
	// Log is the file the process's stdout and stderr are appended to.
	Log string
	// Ready is the path polled until it answers 200 (default DefaultReady); Timeout bounds
	// the start (default DefaultTimeout).
	Ready   string
	Timeout time.Duration
}

// Proc is a started process.
type Proc struct {
	Name string
	Addr string // the address the process bound
	URL  string // http://Addr
	Log  string // its log file
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs s and waits until it has bound its address and s.Ready answers 200 there. If
// the process exits, ctx ends or the wait times out, the process is killed and the error
// carries the end of its log.
func Start(ctx context.Context, s Spec) (*Proc, error) {
	dir, err := os.MkdirTemp("", "procs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) //nolint:errcheck // a temporary directory: the system's to clean if this fails
	addrFile := filepath.Join(dir, "addr")
	out, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "==== %s start %s\n", s.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.Bin, s.Args...) //nolint:noctx // the process outlives ctx, which bounds only its start; Kill and Stop end it
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Appended last, so they win over the same names in the environment or s.Env.
	cmd.Env = append(cmd.Env, "HTTP_ADDR="+cmp.Or(s.Addr, "127.0.0.1:0"), "HTTP_ADDR_FILE="+addrFile)
	cmd.Stdout, cmd.Stderr = out, out
	// If the program that started it dies, so does the process: no orphan keeps a broker
	// identity or a database name after a run that crashed or was interrupted.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start %s: %w", s.Name, err), out.Close())
	}
	p := &Proc{Name: s.Name, Log: s.Log, cmd: cmd, done: make(chan struct{})}
	go func() {
		// The process wrote its log itself; this is only the harness's copy of the file.
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	addr, err := waitReady(ctx, addrFile, s.Ready, s.Timeout, p.done)
	if err != nil {
		p.Kill()
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%w)", err, p.err)
		}
		return nil, fmt.Errorf("%s: %w; end of %s:\n%s", s.Name, err, s.Log, Tail(s.Log, 3000))
	}
	p.Addr, p.URL = addr, "http://"+addr
	return p, nil
}

// StartTest is Start for a test: it fails t if the process does not get ready, kills the
// process when t ends and then, if t failed, logs the end of its log. An empty s.Log is a
// file in t's temporary directory.
func StartTest(t testing.TB, s Spec) *Proc {
	t.Helper()
	if s.Log == "" {
		s.Log = filepath.Join(t.TempDir(), s.Name+".log")
	}
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s: end of its log:\n%s", p.Name, Tail(p.Log, 6000))
		}
	})
	return p
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Kill sends SIGKILL (no shutdown, nothing flushed, no lock released) and waits for the exit.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a graceful exit, then kills. It returns an
// error if the process had to be killed or exited non-zero.
func (p *Proc) Stop(timeout time.Duration) error {
	if p == nil {
		return nil
	}
	if exited, err := p.Exited(); exited {
		return err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return fmt.Errorf("%s exited %d after SIGTERM; end of %s:\n%s", p.Name, ee.ExitCode(), p.Log, Tail(p.Log, 3000))
		}
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, timeout)
	}
}

// Output returns what the process has logged so far (the whole log file).
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// RunFunc is the signature of each binary's run: main calls it with the process's
// arguments, environment and standard streams.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Func is a binary's run function running inside this process, as its main would run it.
type Func struct {
	Name string
	Addr string // the address it bound
	URL  string // http://Addr
	stop context.CancelFunc
	done chan struct{}
	err  error
	out  syncBuffer
}

// StartFunc runs fn with args and env as its whole environment (HTTP_ADDR defaults to
// 127.0.0.1:0, HTTP_ADDR_FILE is the harness's), and waits until it has bound its address
// and DefaultReady answers 200 there. If fn returns, ctx ends or the wait times out, fn is
// stopped and the error carries what it wrote.
func StartFunc(ctx context.Context, name string, fn RunFunc, args []string, env map[string]string) (*Func, error) {
	dir, err := os.MkdirTemp("", "procs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) //nolint:errcheck // a temporary directory: the system's to clean if this fails
	vars := map[string]string{"HTTP_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		vars[k] = v
	}
	vars["HTTP_ADDR_FILE"] = filepath.Join(dir, "addr")
	rctx, stop := context.WithCancel(context.Background())
	f := &Func{Name: name, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.err = fn(rctx, args, func(k string) string { return vars[k] }, &f.out, &f.out)
	}()
	addr, err := waitReady(ctx, vars["HTTP_ADDR_FILE"], DefaultReady, DefaultTimeout, f.done)
	if err != nil {
		serr := f.Stop(DefaultTimeout)
		return nil, fmt.Errorf("%s: %w (run returned: %w); its output:\n%s", name, err, serr, f.Output())
	}
	f.Addr, f.URL = addr, "http://"+addr
	return f, nil
}

// StartFuncTest is StartFunc for a test: it fails t if fn does not get ready, and stops fn
// when t ends.
func StartFuncTest(t testing.TB, name string, fn RunFunc, args []string, env map[string]string) *Func {
	t.Helper()
	f, err := StartFunc(context.Background(), name, fn, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(30 * time.Second); err != nil && !t.Failed() {
			t.Errorf("%s: %v", name, err)
		}
	})
	return f
}

// Stop cancels fn's context (as SIGTERM does to main) and waits up to timeout for it to
// return; it returns what fn returned. Stopping again returns the same.
func (f *Func) Stop(timeout time.Duration) error {
	f.stop()
	select {
	case <-f.done:
		return f.err
	case <-time.After(timeout):
		return fmt.Errorf("%s did not return within %s of its context's end", f.Name, timeout)
	}
}

// Output returns what fn has written so far.
func (f *Func) Output() string { return f.out.String() }

// errExited means the program ended before it was ready.
var errExited = errors.New("exited during start-up")

// waitReady waits until the program wrote its address to addrFile and ready answers 200
// there. It gives up when exited is closed (errExited), ctx ends, or timeout passes.
func waitReady(ctx context.Context, addrFile, ready string, timeout time.Duration, exited <-chan struct{}) (string, error) {
	ready = cmp.Or(ready, DefaultReady)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// No keep-alive: the probe leaves no connection behind in the program or here.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var addr string
	for {
		if addr == "" {
			addr = readAddr(addrFile)
		}
		if addr != "" && answers(ctx, client, "http://"+addr+ready) {
			return addr, nil
		}
		select {
		case <-exited:
			return "", errExited
		case <-ctx.Done():
			if addr == "" {
				return "", fmt.Errorf("no address in HTTP_ADDR_FILE within %s: %w", timeout, ctx.Err())
			}
			return "", fmt.Errorf("%s on %s not 200 within %s: %w", ready, addr, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// readAddr returns the address in path, or "" while there is none (the program writes the
// file whole, by renaming it into place).
func readAddr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// answers reports whether a GET of url answers 200.
func answers(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Tail returns up to the last n bytes of the file at path.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close() //nolint:errcheck // read only: closing it loses nothing
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(b, off)
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for the writes of a program's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
