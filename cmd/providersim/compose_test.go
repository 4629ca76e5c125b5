package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/walletsaga/walletsaga/deploy"
	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// Every service of docker-compose.yml that runs /providersim gets only variables providersim
// reads, with values its configuration accepts, in dev (the only environment it runs in),
// listening where compose publishes it.
func TestComposeEnvironmentIsProvidersimConfig(t *testing.T) {
	t.Parallel()
	binarytest.RequireCompose(t, binarytest.Compose[config]{
		Binary: "/providersim", DefaultSub: "serve", Services: []string{"providersim"}, Parse: parseConfig,
		Check: func(t *testing.T, r deploy.BinaryRun, cfg config, _ map[string]int) {
			assert.Equal(t, "serve", r.Sub, "%s: providersim subcommand", r.Name)
			assert.Equal(t, cli.Dev, cfg.Mode, "%s: the simulator starts only in dev", r.Name)
			assert.Equal(t, "json", cfg.LogFormat, "%s", r.Name)
			assert.NotEmpty(t, cfg.DatabaseURL, "%s: keeps its charges and orders across restarts", r.Name)
			deploy.RequirePublishedHTTP(t, r, cfg.HTTPAddr)
		},
	})
}
