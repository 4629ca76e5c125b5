package httpx_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// TestServerServesBetweenStartAndStop: Start binds and reports the address, the server
// serves, and Stop lets the request in flight finish before Stopped closes.
func TestServerServesBetweenStartAndStop(t *testing.T) {
	t.Parallel()
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(inHandler)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	addrs := make(chan net.Addr, 1)
	srv := httpx.NewServer("127.0.0.1:0", h, slog.New(slog.DiscardHandler), func(a net.Addr) { addrs <- a })
	require.NoError(t, srv.Start(t.Context()))
	<-srv.Started()
	require.ErrorIs(t, srv.Start(t.Context()), lifecycle.ErrStarted)
	addr := <-addrs

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr.String() + "/")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{body: string(b), err: err}
	}()
	<-inHandler
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(context.Background()) }()
	close(release)
	require.NoError(t, <-stopped)
	<-srv.Stopped()
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, "done", r.body, "the request in flight finished")
	_, err := net.Dial("tcp", addr.String())
	require.Error(t, err, "the server no longer listens")
}

// TestServerStartFailsOnABoundAddress: an address taken is Start's error.
func TestServerStartFailsOnABoundAddress(t *testing.T) {
	t.Parallel()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close() //nolint:errcheck // the test's own listener
	srv := httpx.NewServer(ln.Addr().String(), http.NotFoundHandler(), slog.New(slog.DiscardHandler), nil)
	require.ErrorContains(t, srv.Start(t.Context()), "HTTP_ADDR")
	require.NoError(t, srv.Stop(t.Context()), "a server that never started stops at once")
	<-srv.Stopped()
	require.ErrorIs(t, srv.Start(t.Context()), lifecycle.ErrStarted)
}
