package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The RocketMQ client takes name servers as IP:port only; a name (the compose stack's
// namesrv:9876) is resolved first, an address kept as it is.
func TestResolveNamesrv(t *testing.T) {
	t.Parallel()
	got, err := ResolveNamesrv(t.Context(), []string{"127.0.0.1:9876", "localhost:9877", "[::1]:9878"})
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:9876", "127.0.0.1:9877", "[::1]:9878"}, got)

	_, err = ResolveNamesrv(t.Context(), []string{"no-such-host.invalid:9876"})
	require.ErrorContains(t, err, "resolving no-such-host.invalid")
	_, err = ResolveNamesrv(t.Context(), []string{"namesrv"})
	require.ErrorContains(t, err, `ROCKETMQ_NAMESRV "namesrv"`)
}
