package main

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/deploy"
)

// Every service of docker-compose.yml that runs /walletsvc gets only variables walletsvc
// reads, with values its configuration accepts. The names are those parseConfig asks getenv
// for (each flag's default comes from the variable of the same name), so they cannot drift
// from config.go.
func TestComposeEnvironmentIsWalletsvcConfig(t *testing.T) {
	t.Parallel()
	p, err := deploy.LoadCompose(context.Background(), filepath.Join("..", ".."))
	require.NoError(t, err)
	topics, err := deploy.Topics(p)
	require.NoError(t, err)

	var ran []string
	for _, name := range p.ServiceNames() {
		svc := p.Services[name]
		if len(svc.Command) == 0 || svc.Command[0] != "/walletsvc" {
			continue
		}
		ran = append(ran, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env, err := deploy.Environment(svc)
			require.NoError(t, err)
			// As run does: an optional subcommand, then flags.
			sub, args := "serve", svc.Command[1:]
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				sub, args = args[0], args[1:]
			}
			require.Contains(t, []string{"serve", "migrate"}, sub, "%s: walletsvc subcommand", name)
			read := map[string]bool{}
			cfg, rest, err := parseConfig("walletsvc "+sub, args, func(k string) string {
				read[k] = true
				return env[k]
			}, io.Discard)
			require.NoError(t, err, "%s: walletsvc rejects the compose settings", name)
			require.Empty(t, rest, "%s: arguments", name)
			require.True(t, read["DATABASE_URL"], "parseConfig reads the environment through getenv")
			for k := range env {
				assert.True(t, read[k], "docker-compose.yml gives %s the variable %s, which walletsvc does not read", name, k)
			}
			assert.Equal(t, "json", cfg.LogFormat, "%s", name)
			if sub != "serve" {
				return
			}
			assert.False(t, cfg.MigrateOnStart, "%s: the migrate job migrates", name)
			host, port, err := net.SplitHostPort(cfg.HTTPAddr)
			require.NoError(t, err)
			assert.Equal(t, "0.0.0.0", host, "%s: HTTP_ADDR", name)
			assert.True(t, slices.ContainsFunc(svc.Ports, func(pc types.ServicePortConfig) bool { return strconv.Itoa(int(pc.Target)) == port }),
				"%s: HTTP_ADDR's port %s is published", name, port)
			assert.Equal(t, 8, topics[cfg.Topic], "%s: the topics job creates %s with 8 queues", name, cfg.Topic)
		})
	}
	assert.ElementsMatch(t, []string{"migrate", "walletsvc"}, ran, "services running /walletsvc")
}
