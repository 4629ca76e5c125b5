package main

import (
	"testing"

	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// Every service of docker-compose.yml that runs /walletsvc gets only variables walletsvc
// reads, with values its configuration accepts; the stack's Prometheus scrapes the
// long-running one where it listens.
func TestComposeEnvironmentIsWalletsvcConfig(t *testing.T) {
	t.Parallel()
	binarytest.RequireServiceCompose(t, binarytest.Compose[config]{Binary: "/walletsvc", DefaultSub: "serve",
		Services: []string{"migrate", "walletsvc"}, Parse: parseConfig}, "serve", func(c config) cli.Service { return c.Service })
}
