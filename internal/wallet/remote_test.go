package wallet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/saga"
)

// A remote error's class decides the step's outcome; a retryable one's RetryAfter (an HTTP
// Retry-After) becomes the outcome's delay, which the engine takes as the floor of the
// step's next_run_at.
func TestRemoteOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		kind  saga.OutcomeKind
		code  string
		delay time.Duration
	}{
		{"success", nil, saga.OutcomeDone, "", 0},
		{"permanent", PermanentError("declined", errors.New("no")), saga.OutcomeFail, "declined", 0},
		{"permanent, wrapped", fmt.Errorf("gateway: %w", PermanentError("rejected", nil)), saga.OutcomeFail, "rejected", 0},
		{"retryable", RetryableError("unavailable", errors.New("503")), saga.OutcomeRetry, "unavailable", 0},
		{"retryable with Retry-After", &RemoteError{Code: "rate_limited", RetryAfter: 7 * time.Second}, saga.OutcomeRetry, "rate_limited", 7 * time.Second},
		{"wrapped, with Retry-After", fmt.Errorf("x: %w", &RemoteError{Code: "unavailable", RetryAfter: time.Minute}), saga.OutcomeRetry, "unavailable", time.Minute},
		{"permanent ignores Retry-After", &RemoteError{Code: "declined", Permanent: true, RetryAfter: time.Minute}, saga.OutcomeFail, "declined", 0},
		{"unclassified", context.DeadlineExceeded, saga.OutcomeRetry, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := remoteOutcome(tc.err)
			require.Equal(t, tc.kind, o.Kind)
			require.Equal(t, tc.code, o.Code)
			require.Equal(t, tc.delay, o.Delay)
		})
	}
}
