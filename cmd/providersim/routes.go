package main

import (
	"net/http"

	"github.com/walletsaga/walletsaga/internal/providersim"
)

// newServer builds providersim's HTTP handler: the contract's four operations, GET /healthz,
// GET /openapi.yaml and the control endpoint POST /sim/outages, all listed in
// providersim.Simulator.Handler (the bench serves the same handler in its own process).
func newServer(sim *providersim.Simulator) http.Handler { return sim.Handler() }
