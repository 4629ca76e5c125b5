package smslog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// TestAUsersPageHoldsAtMostMaxUsersPage: each user's summary counts that user's SMS, so a page
// of users is capped tighter than the other lists; a larger limit is refused, not cut.
func TestAUsersPageHoldsAtMostMaxUsersPage(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := smslog.NewStore(pool)
	_, err := s.Users(t.Context(), smslog.MaxUsersPage+1, "", "")
	require.ErrorContains(t, err, "limit must be between 1 and 100")
	_, err = s.Users(t.Context(), smslog.MaxUsersPage, "", "")
	require.NoError(t, err)
}
