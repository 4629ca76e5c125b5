package procs_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/procs"
)

// The test binary doubles as the process under test: with PROCS_HELPER set it serves
// /healthz on HTTP_ADDR (or exits at once with PROCS_HELPER=fail) and exits 0 on SIGTERM.
func TestMain(m *testing.M) {
	switch os.Getenv("PROCS_HELPER") {
	case "":
		os.Exit(m.Run())
	case "fail":
		fmt.Println("helper: cannot start: no database")
		os.Exit(3)
	}
	srv := &http.Server{Addr: os.Getenv("HTTP_ADDR"), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
	})}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		<-sig
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		os.Exit(1)
	}
	os.Exit(0)
}

func spec(t *testing.T, mode string) procs.Spec {
	return procs.Spec{Name: "helper", Bin: os.Args[0], Env: map[string]string{"PROCS_HELPER": mode}, Log: filepath.Join(t.TempDir(), "helper.log"), Timeout: 20 * time.Second}
}

func TestStartWaitsForReadyThenStopsGracefully(t *testing.T) {
	p, err := procs.Start(context.Background(), spec(t, "serve"))
	require.NoError(t, err)
	resp, err := http.Get(p.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	exited, _ := p.Exited()
	require.False(t, exited)
	require.NoError(t, p.Stop(10*time.Second), "SIGTERM: a clean exit")
	exited, _ = p.Exited()
	require.True(t, exited)
}

func TestKillIsImmediateAndTheAddressCanBeReused(t *testing.T) {
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
	_, err := procs.Start(context.Background(), spec(t, "fail"))
	require.ErrorContains(t, err, "exited during start-up")
	require.ErrorContains(t, err, "cannot start: no database")
}
