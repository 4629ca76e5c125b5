// Package e2etest runs a binary's run function in-process against the real stack, the way
// main does, and waits for it to answer.
package e2etest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// RunFunc is the signature of each binary's run.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Process is a running program.
type Process struct {
	BaseURL string
	cancel  context.CancelFunc
	done    chan error
	out     *syncBuffer
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs fn with env (HTTP_ADDR is set to a free port) and waits for /healthz.
func Start(t testing.TB, fn RunFunc, args []string, env map[string]string) *Process {
	t.Helper()
	addr := FreeAddr(t)
	env2 := map[string]string{"HTTP_ADDR": addr}
	for k, v := range env {
		env2[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{BaseURL: "http://" + addr, cancel: cancel, done: make(chan error, 1), out: &syncBuffer{}}
	go func() { p.done <- fn(ctx, args, func(k string) string { return env2[k] }, p.out, p.out) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-p.done:
			t.Fatalf("program exited during start-up: %v\n%s", err, p.out.String())
		default:
		}
		resp, err := http.Get(p.BaseURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /healthz within 60s\n%s", p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { _ = p.Stop(30 * time.Second) })
	return p
}

// Stop cancels the program (as SIGTERM does) and returns what run returned.
func (p *Process) Stop(timeout time.Duration) error {
	p.cancel()
	select {
	case err, ok := <-p.done:
		if !ok {
			return nil
		}
		close(p.done)
		return err
	case <-time.After(timeout):
		return fmt.Errorf("program did not stop within %s", timeout)
	}
}

// Output returns what the program logged so far.
func (p *Process) Output() string { return p.out.String() }

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
