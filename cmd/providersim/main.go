// Command providersim is the payment gateway and merchant simulator: a provider process
// that speaks walletsaga's provider contract (internal/provider/openapi.yaml) over HTTP, for
// the dev stack, the tests, the demo, make chaos and docker compose. It approves every
// payment source but one, so it refuses to start unless WALLETSAGA_ENV=dev.
//
//	providersim [serve] [flags]                          the simulator (default)
//	providersim outage gateway|merchant fail|timeout D   switch an outage of a running one
package main

import "github.com/walletsaga/walletsaga/internal/cli"

func main() { cli.Main("providersim", run) }
