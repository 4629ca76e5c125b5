package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/walletsaga/walletsaga/deploy"
	"github.com/walletsaga/walletsaga/internal/cli"
	"github.com/walletsaga/walletsaga/internal/testutil/binarytest"
)

// Every service of docker-compose.yml that runs /notifier gets only variables the notifier
// reads, with values its configuration accepts; the stack's Prometheus scrapes the
// long-running one where it listens, and its group's retry and dead-letter topics exist.
func TestComposeEnvironmentIsNotifierConfig(t *testing.T) {
	t.Parallel()
	groupTopics := func(t *testing.T, r deploy.BinaryRun, cfg config, topics map[string]int) {
		for _, tp := range []string{"%RETRY%" + cfg.Group, "%DLQ%" + cfg.Group} {
			assert.Equal(t, 1, topics[tp], "%s: the topics job creates %s with 1 queue", r.Name, tp)
		}
	}
	binarytest.RequireServiceCompose(t, binarytest.Compose[config]{Binary: "/notifier", DefaultSub: "run",
		Services: []string{"notifier", "notifier-migrate"}, Parse: parseConfig, Check: groupTopics}, "run", func(c config) cli.Service { return c.Service })
}
