// Package procs runs the product's binaries as real operating-system processes, the way an
// operator would: started with an environment, waited on until they answer over HTTP, stopped
// with SIGTERM or killed with SIGKILL. The benchmark and the chaos run use it.
package procs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Spec says how to start one process.
type Spec struct {
	Name string            // for messages
	Bin  string            // path of the binary
	Args []string          // arguments
	Env  map[string]string // added to this process's environment
	// Addr is the process's HTTP_ADDR; empty picks a free loopback port.
	Addr string
	// Log is the file the process's stdout and stderr are appended to.
	Log string
	// Ready is the path polled until it answers 200 (default /healthz); Timeout bounds the wait
	// (default 60s).
	Ready   string
	Timeout time.Duration
}

// Proc is a started process.
type Proc struct {
	Name string
	URL  string // http://Addr
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start runs s and waits until s.Ready answers 200. If the process exits or the wait times out,
// the process is killed and the error carries the end of its log.
func Start(ctx context.Context, s Spec) (*Proc, error) {
	addr := s.Addr
	if addr == "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	ready, timeout := s.Ready, s.Timeout
	if ready == "" {
		ready = "/healthz"
	}
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	out, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "==== %s start %s\n", s.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "HTTP_ADDR="+addr)
	cmd.Stdout, cmd.Stderr = out, out
	// If the program that started it dies, so does the process: no orphan keeps a broker
	// identity or a database name after a run that crashed or was interrupted.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p := &Proc{Name: s.Name, URL: "http://" + addr, Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); out.Close(); close(p.done) }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited during start-up (%v); end of %s:\n%s", s.Name, p.err, s.Log, Tail(s.Log, 3000))
		case <-ctx.Done():
			p.Kill()
			return nil, ctx.Err()
		default:
		}
		if resp, err := client.Get(p.URL + ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("%s: %s not 200 within %s; end of %s:\n%s", s.Name, ready, timeout, s.Log, Tail(s.Log, 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
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
			return fmt.Errorf("%s exited %d after SIGTERM", p.Name, ee.ExitCode())
		}
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, timeout)
	}
}

// Tail returns up to the last n bytes of the file at path.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(b, off)
	return string(b)
}
