package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/deploy"
)

// Every service of docker-compose.yml that runs /notifier gets only variables the notifier
// reads, with values its configuration accepts. The names are those parseConfig asks getenv
// for (each flag's default comes from the variable of the same name), so they cannot drift
// from config.go. The stack's Prometheus scrapes the long-running one where it listens.
func TestComposeEnvironmentIsNotifierConfig(t *testing.T) {
	t.Parallel()
	p, err := deploy.LoadCompose(context.Background(), filepath.Join("..", ".."))
	require.NoError(t, err)
	topics, err := deploy.Topics(p)
	require.NoError(t, err)
	runs, err := deploy.RunsOf(p, "/notifier", "run")
	require.NoError(t, err)

	var ran []string
	for _, r := range runs {
		ran = append(ran, r.Name)
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, []string{"run", "migrate"}, r.Sub, "%s: notifier subcommand", r.Name)
			var cfg config
			read := deploy.RequireReadsEnvironment(t, r, "the notifier", func(getenv func(string) string) error {
				var rest []string
				var err error
				cfg, rest, err = parseConfig(r.Sub, r.Args, getenv, io.Discard, nil)
				require.Empty(t, rest, "%s: arguments", r.Name)
				return err
			})
			require.True(t, read["DATABASE_URL"], "parseConfig reads the environment through getenv")
			assert.Equal(t, "json", cfg.LogFormat, "%s", r.Name)
			if r.Sub != "run" {
				return
			}
			assert.False(t, cfg.MigrateOnStart, "%s: the migrate job migrates", r.Name)
			deploy.RequirePublishedHTTP(t, r, cfg.HTTPAddr)
			deploy.RequireScraped(t, filepath.Join("..", ".."), r, cfg.HTTPAddr)
			// The topic it consumes, and its group's retry and dead-letter topics, exist.
			assert.Equal(t, 8, topics[cfg.Topic], "%s: the topics job creates %s with 8 queues", r.Name, cfg.Topic)
			for _, tp := range []string{"%RETRY%" + cfg.Group, "%DLQ%" + cfg.Group} {
				assert.Equal(t, 1, topics[tp], "%s: the topics job creates %s with 1 queue", r.Name, tp)
			}
		})
	}
	assert.ElementsMatch(t, []string{"notifier", "notifier-migrate"}, ran, "services running /notifier")
}
