package instance_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/instance"
)

// A further client of a named process is named after it; one of an unnamed process stays
// unnamed, so that it too gets a new name per process.
func TestSuffixed(t *testing.T) {
	t.Parallel()
	require.Equal(t, "notifier-1-dlq", instance.Suffixed("notifier-1", "-dlq"))
	require.Empty(t, instance.Suffixed("", "-dlq"))
}

// A named process owns its leases under host/name, the same across restarts; an unnamed one
// under a name no other process (nor a later one of the same pid) has.
func TestLaneOwner(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	require.Equal(t, host+"/notifier-1", instance.LaneOwner("notifier-1"))
	require.Equal(t, instance.LaneOwner("notifier-1"), instance.LaneOwner("notifier-1"))

	a, b := instance.LaneOwner(""), instance.LaneOwner("")
	prefix := fmt.Sprintf("%s/pid-%d-", host, os.Getpid())
	require.True(t, strings.HasPrefix(a, prefix), "%q does not start with %q", a, prefix)
	require.NotEqual(t, a, b, "two unnamed owners share a name")
}
