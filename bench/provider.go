package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/walletsaga/walletsaga/internal/providersim"
)

// providerStub is the payment gateway and merchant of a bench run: the simulator's handler on
// its memory store, served by this load generator itself. So the product's Postgres work per
// saga is the product's alone, and the stub's CPU is counted under bench, not walletsvc.
type providerStub struct {
	URL string
	sim *providersim.Simulator
	srv *http.Server
}

// startProviderStub serves a simulator with latency on a loopback port of its own.
func startProviderStub(ctx context.Context, latency time.Duration) (*providerStub, error) {
	sim, err := providersim.New(providersim.NewMemoryStore(), providersim.Options{Latency: latency})
	if err != nil {
		return nil, err
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("provider stub: %w", err)
	}
	s := &providerStub{URL: "http://" + ln.Addr().String(), sim: sim, srv: &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("provider stub: %v", err))
		}
	}()
	return s, nil
}

// close stops the stub, releasing any call it holds.
func (s *providerStub) close() {
	s.sim.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
