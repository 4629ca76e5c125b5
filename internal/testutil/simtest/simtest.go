// Package simtest serves the provider simulator in a test (httptest) and points the HTTP
// adapters at it, so that a test of the sagas reaches its gateway and merchant the way
// walletsvc does: over HTTP, through internal/provider.
package simtest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/walletsaga/walletsaga/internal/provider"
	"github.com/walletsaga/walletsaga/internal/providersim"
)

// Provider is a running simulator and the adapters that reach it.
type Provider struct {
	*providersim.Simulator
	URL      string
	Gateway  *provider.Gateway
	Merchant *provider.Merchant
}

// Start serves a simulator on store (a MemoryStore when nil) with o until t ends.
func Start(t testing.TB, store providersim.Store, o providersim.Options) *Provider {
	t.Helper()
	if store == nil {
		store = providersim.NewMemoryStore()
	}
	sim, err := providersim.New(store, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		sim.Close() // releases calls hanging in an outage, which Close would wait for
		srv.Close()
	})
	opts := provider.Options{URL: srv.URL, Token: o.Token, Timeout: 10 * time.Second}
	if opts.Token == "" {
		opts.Token = providersim.DevToken
	}
	gw, err := provider.NewGateway(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := provider.NewMerchant(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &Provider{Simulator: sim, URL: srv.URL, Gateway: gw, Merchant: m}
}

// Charges returns every charge the simulator holds.
func (p *Provider) Charges(t testing.TB) []providersim.Charge {
	t.Helper()
	cs, err := p.Store().Charges(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Orders returns every order the simulator holds.
func (p *Provider) Orders(t testing.TB) []providersim.Order {
	t.Helper()
	os, err := p.Store().Orders(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return os
}

// Payouts returns every payout the simulator holds.
func (p *Provider) Payouts(t testing.TB) []providersim.Payout {
	t.Helper()
	ps, err := p.Store().Payouts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// ChargesIn counts the charges in status.
func (p *Provider) ChargesIn(t testing.TB, status string) int {
	t.Helper()
	n := 0
	for _, c := range p.Charges(t) {
		if c.Status == status {
			n++
		}
	}
	return n
}

// OrdersIn counts the orders in status.
func (p *Provider) OrdersIn(t testing.TB, status string) int {
	t.Helper()
	n := 0
	for _, o := range p.Orders(t) {
		if o.Status == status {
			n++
		}
	}
	return n
}

// SetOutage switches an outage on (see providersim.Simulator.SetOutage), failing t if the
// arguments are wrong.
func (p *Provider) SetOutage(t testing.TB, target, mode string, d time.Duration) {
	t.Helper()
	if err := p.Simulator.SetOutage(target, mode, d); err != nil {
		t.Fatal(err)
	}
}

// PayoutsIn counts the payouts in status.
func (p *Provider) PayoutsIn(t testing.TB, status string) int {
	t.Helper()
	n := 0
	for _, po := range p.Payouts(t) {
		if po.Status == status {
			n++
		}
	}
	return n
}
