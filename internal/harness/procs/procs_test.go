package procs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/harness/procs"
)

// The test binary doubles as the process under test: with PROCS_HELPER set it runs helper
// (serve, silent) or exits at once (fail).
func TestMain(m *testing.M) {
	switch mode := os.Getenv("PROCS_HELPER"); mode {
	case "":
		// The RocketMQ client, which internal/cli's broker plumbing links in, starts a cache
		// janitor when its package initialises, before any test: not a leak of this package.
		goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
	case "fail":
		fmt.Println("helper: cannot start: no database")
		os.Exit(3)
	default:
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		getenv := os.Getenv
		if mode == "silent" {
			getenv = func(k string) string {
				if k == "HTTP_ADDR_FILE" {
					return ""
				}
				return os.Getenv(k)
			}
		}
		err := helper(ctx, nil, getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Println("helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// helper is a program as the binaries are: it listens on HTTP_ADDR, says where in
// HTTP_ADDR_FILE, serves /healthz until ctx ends, then shuts down.
func helper(ctx context.Context, _ []string, getenv func(string) string, stdout, _ io.Writer) error {
	ln, err := net.Listen("tcp", getenv("HTTP_ADDR"))
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
	})}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintln(stdout, "helper listening on", ln.Addr())
	if err := cli.WriteAddrFile(getenv("HTTP_ADDR_FILE"), ln.Addr()); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stdout, "helper stopped")
	return nil
}

func spec(t *testing.T, mode string) procs.Spec {
	return procs.Spec{Name: "helper", Bin: os.Args[0], Env: map[string]string{"PROCS_HELPER": mode}, Log: filepath.Join(t.TempDir(), "helper.log"), Timeout: 20 * time.Second}
}

func get(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

func TestStartWaitsForReadyThenStopsGracefully(t *testing.T) {
	t.Parallel()
	p, err := procs.Start(context.Background(), spec(t, "serve"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get(t, p.URL+"/healthz"))
	_, port, err := net.SplitHostPort(p.Addr)
	require.NoError(t, err)
	require.NotEqual(t, "0", port, "the port the process bound, read from HTTP_ADDR_FILE")
	require.Contains(t, p.Output(), "helper listening on "+p.Addr)
	exited, _ := p.Exited()
	require.False(t, exited)
	require.NoError(t, p.Stop(10*time.Second), "SIGTERM: a clean exit")
	exited, _ = p.Exited()
	require.True(t, exited)
	require.Contains(t, p.Output(), "helper stopped")
}

// Processes started at the same moment each bind a port of their own: the harness hands
// out none that could be handed out twice.
func TestProcessesStartedAtOnceGetPortsOfTheirOwn(t *testing.T) {
	t.Parallel()
	const n = 6
	ps := make([]*procs.Proc, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ps {
		s := spec(t, "serve")
		wg.Go(func() { ps[i], errs[i] = procs.Start(context.Background(), s) })
	}
	wg.Wait()
	for _, p := range ps {
		t.Cleanup(p.Kill)
	}
	require.NoError(t, errors.Join(errs...))
	seen := map[string]bool{}
	for _, p := range ps {
		require.False(t, seen[p.Addr], "%s handed out twice", p.Addr)
		seen[p.Addr] = true
		require.Equal(t, http.StatusOK, get(t, p.URL+"/healthz"))
	}
}

func TestKillIsImmediateAndTheAddressCanBeReused(t *testing.T) {
	t.Parallel()
	s := spec(t, "serve")
	p, err := procs.Start(context.Background(), s)
	require.NoError(t, err)
	p.Kill()
	exited, err := p.Exited()
	require.True(t, exited)
	require.ErrorContains(t, err, "killed")
	s.Addr = p.Addr
	again, err := procs.Start(context.Background(), s)
	require.NoError(t, err, "restart on the same address")
	require.Equal(t, p.URL, again.URL)
	require.NoError(t, again.Stop(10*time.Second))
}

func TestStartReportsAnEarlyExitWithTheLog(t *testing.T) {
	t.Parallel()
	_, err := procs.Start(context.Background(), spec(t, "fail"))
	require.ErrorContains(t, err, "exited during start-up")
	require.ErrorContains(t, err, "exit status 3")
	require.ErrorContains(t, err, "cannot start: no database")
}

// A program that never says where it listens is not ready, however well it serves.
func TestStartNeedsTheAddressFile(t *testing.T) {
	t.Parallel()
	s := spec(t, "silent")
	s.Timeout = 500 * time.Millisecond
	_, err := procs.Start(context.Background(), s)
	require.ErrorContains(t, err, "no address in HTTP_ADDR_FILE")
	require.ErrorContains(t, err, "helper listening on", "the error carries the log")
}

func TestStartFuncRunsTheProgramInThisProcess(t *testing.T) {
	t.Parallel()
	f, err := procs.StartFunc(context.Background(), "helper", helper, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get(t, f.URL+"/healthz"))
	require.Contains(t, f.Output(), "helper listening on "+f.Addr)
	require.NoError(t, f.Stop(10*time.Second), "cancelling run's context is its graceful stop")
	require.NoError(t, f.Stop(10*time.Second), "stopping again returns the same")
	require.Contains(t, f.Output(), "helper stopped")

	pinned := procs.StartFuncTest(t, "helper", helper, nil, map[string]string{"HTTP_ADDR": f.Addr})
	require.Equal(t, f.URL, pinned.URL, "HTTP_ADDR given: that address")
}

func TestStartFuncReportsARunThatEndsEarly(t *testing.T) {
	t.Parallel()
	fails := func(_ context.Context, _ []string, getenv func(string) string, stdout, _ io.Writer) error {
		fmt.Fprintln(stdout, "cannot reach the database")
		return fmt.Errorf("DATABASE_URL %q unreachable", getenv("DATABASE_URL"))
	}
	_, err := procs.StartFunc(context.Background(), "broken", fails, nil, map[string]string{"DATABASE_URL": "postgres://nowhere"})
	require.ErrorContains(t, err, "exited during start-up")
	require.ErrorContains(t, err, `DATABASE_URL "postgres://nowhere" unreachable`)
	require.ErrorContains(t, err, "cannot reach the database")
}
