package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/deploy"
	"github.com/walletsaga/walletsaga/internal/cli"
)

// Every service of docker-compose.yml that runs /providersim gets only variables providersim
// reads, with values its configuration accepts, in dev (the only environment it runs in),
// listening where compose publishes it.
func TestComposeEnvironmentIsProvidersimConfig(t *testing.T) {
	t.Parallel()
	p, err := deploy.LoadCompose(context.Background(), filepath.Join("..", ".."))
	require.NoError(t, err)
	runs, err := deploy.RunsOf(p, "/providersim", "serve")
	require.NoError(t, err)
	var ran []string
	for _, r := range runs {
		ran = append(ran, r.Name)
		require.Equal(t, "serve", r.Sub, "%s: providersim subcommand", r.Name)
		var cfg config
		deploy.RequireReadsEnvironment(t, r, "providersim", func(getenv func(string) string) error {
			var rest []string
			var err error
			cfg, rest, err = parseConfig(r.Sub, r.Args, getenv, io.Discard)
			require.Empty(t, rest, "%s: arguments", r.Name)
			return err
		})
		assert.Equal(t, cli.Dev, cfg.Mode, "%s: the simulator starts only in dev", r.Name)
		assert.Equal(t, "json", cfg.LogFormat, "%s", r.Name)
		assert.NotEmpty(t, cfg.DatabaseURL, "%s: keeps its charges and orders across restarts", r.Name)
		deploy.RequirePublishedHTTP(t, r, cfg.HTTPAddr)
	}
	assert.Equal(t, []string{"providersim"}, ran, "services running /providersim")
}
