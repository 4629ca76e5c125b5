// The gate view.

package gate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTheGateViewCountsAsDueOnlyWhatAClaimWouldTake: /v1/gate's due_users and
// walletsaga_notify_due_users count the users a claim would take now; a user leased by a
// lane is not one of them, though its wake rows stay while it is leased.
func TestTheGateViewCountsAsDueOnlyWhatAClaimWouldTake(t *testing.T) {
	t.Parallel()
	_, s := userOneClaimed(t)
	ctx := context.Background()
	receive(t, s, false, inbound(t, 2, 1, 100))
	v, err := s.View(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, v.Due, "user 2 is due; user 1 is leased")
	c, err := s.claimUsers(ctx, "b", 10, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1, "a claim takes what the view counts")
	v, err = s.View(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.Zero(t, v.Due, "both users are leased")
}
