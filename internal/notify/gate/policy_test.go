package gate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
)

// longest and shortest pin the backoff's jitter to its ends.
func longest(n int64) int64 { return n - 1 }

func shortest(int64) int64 { return 0 }

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Base: time.Second, Max: 5 * time.Minute, MaxAttempts: 8, DeadLetterAfter: 15 * time.Minute}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 8: 128 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 60: 5 * time.Minute} {
		require.Equal(t, want, p.Backoff(n, longest), "attempt %d", n)
		// Jitter draws the other half, never below the base.
		require.Equal(t, max(want/2, p.Base), p.Backoff(n, shortest), "attempt %d, shortest", n)
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Base: time.Second, Max: time.Minute, MaxAttempts: 3, DeadLetterAfter: 10 * time.Minute}
	boom := errors.New("boom")
	down := fmt.Errorf("503: %w", notify.ErrProviderUnavailable)
	refused := fmt.Errorf("400 bad number: %w", notify.ErrPermanent)
	had := fmt.Errorf("200 replayed: %w", notify.ErrAlreadyDelivered)
	busy := fmt.Errorf("409 in_progress: %w", notify.ErrInProgress)
	limited := notify.RetryLater(fmt.Errorf("429: %w", notify.ErrProviderUnavailable), 10*time.Second)
	greedy := notify.RetryLater(fmt.Errorf("503: %w", notify.ErrProviderUnavailable), time.Hour)
	busyLater := notify.RetryLater(busy, 5*time.Second)
	for _, tc := range []struct {
		name string
		a    Attempt
		want Decision
	}{
		{"accepted", Attempt{Prior: 0}, Decision{Verdict: Sent, Attempts: 1}},
		{"accepted after failures", Attempt{Prior: 5, Age: time.Hour}, Decision{Verdict: Sent, Attempts: 6}},
		{"already delivered is delivered", Attempt{Prior: 1, Err: had}, Decision{Verdict: Sent, Attempts: 2}},
		{"in progress is never delivered: retry under the same key", Attempt{Prior: 0, Err: busy},
			Decision{Verdict: Retry, Attempts: 1, Delay: time.Second, Reason: busy.Error()}},
		{"in progress with attempts spent but the window not: retry", Attempt{Prior: 9, Age: 9 * time.Minute, Err: busy},
			Decision{Verdict: Retry, Attempts: 10, Delay: time.Minute, Reason: busy.Error()}},
		{"in progress past both: dead-lettered like any failure", Attempt{Prior: 2, Age: 10 * time.Minute, Err: busy},
			Decision{Verdict: DeadLettered, Attempts: 3, Reason: "gave up after 3 attempts over 10m0s: " + busy.Error()}},
		{"a permanent failure dead-letters at once", Attempt{Prior: 0, Err: refused},
			Decision{Verdict: DeadLettered, Attempts: 1, Reason: "permanent failure: " + refused.Error()}},
		{"first failure retries after the base", Attempt{Prior: 0, Err: boom}, Decision{Verdict: Retry, Attempts: 1, Delay: time.Second, Reason: "boom"}},
		{"the backoff doubles", Attempt{Prior: 1, Age: time.Second, Err: down}, Decision{Verdict: Retry, Attempts: 2, Delay: 2 * time.Second, Reason: down.Error()}},
		{"attempts spent but the window not: retry", Attempt{Prior: 9, Age: 9 * time.Minute, Err: boom},
			Decision{Verdict: Retry, Attempts: 10, Delay: time.Minute, Reason: "boom"}},
		{"window passed but attempts not: retry", Attempt{Prior: 1, Age: time.Hour, Err: boom},
			Decision{Verdict: Retry, Attempts: 2, Delay: 2 * time.Second, Reason: "boom"}},
		{"both: dead-lettered", Attempt{Prior: 2, Age: 10 * time.Minute, Err: boom},
			Decision{Verdict: DeadLettered, Attempts: 3, Reason: "gave up after 3 attempts over 10m0s: boom"}},
		{"held back by the breaker: postponed, no attempt spent", Attempt{Prior: 2, Age: time.Hour, Err: down, Held: 3 * time.Second},
			Decision{Verdict: Postponed, Attempts: 2, Delay: 3 * time.Second, Reason: down.Error()}},
		{"a permanent failure is permanent even while held", Attempt{Prior: 0, Err: refused, Held: time.Second},
			Decision{Verdict: DeadLettered, Attempts: 1, Reason: "permanent failure: " + refused.Error()}},
		{"Retry-After longer than the backoff: waited", Attempt{Prior: 0, Err: limited},
			Decision{Verdict: Retry, Attempts: 1, Delay: 10 * time.Second, Reason: limited.Error()}},
		{"Retry-After shorter than the backoff: the backoff", Attempt{Prior: 5, Age: time.Minute, Err: limited},
			Decision{Verdict: Retry, Attempts: 6, Delay: 32 * time.Second, Reason: limited.Error()}},
		{"Retry-After beyond the longest backoff: the longest backoff", Attempt{Prior: 0, Err: greedy},
			Decision{Verdict: Retry, Attempts: 1, Delay: time.Minute, Reason: greedy.Error()}},
		{"Retry-After on a 409: waited", Attempt{Prior: 0, Err: busyLater},
			Decision{Verdict: Retry, Attempts: 1, Delay: 5 * time.Second, Reason: busyLater.Error()}},
		{"Retry-After while held: the longer of the two", Attempt{Prior: 1, Err: limited, Held: 3 * time.Second},
			Decision{Verdict: Postponed, Attempts: 1, Delay: 10 * time.Second, Reason: limited.Error()}},
		{"Retry-After past both: dead-lettered", Attempt{Prior: 2, Age: 10 * time.Minute, Err: limited},
			Decision{Verdict: DeadLettered, Attempts: 3, Reason: "gave up after 3 attempts over 10m0s: " + limited.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, p.Decide(tc.a, longest))
		})
	}
}

func TestDefaultRetryPolicyTakesLongEnough(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy
	require.NoError(t, p.Validate())
	// Failing every time from the start: the SMS is dead-lettered at the first attempt
	// made at least DeadLetterAfter after the first one, never sooner.
	var age time.Duration
	n := 0
	for {
		d := p.Decide(Attempt{Prior: n, Age: age, Err: errors.New("down")}, shortest)
		n = d.Attempts
		if d.Verdict == DeadLettered {
			break
		}
		require.Equal(t, Retry, d.Verdict)
		age += d.Delay
	}
	require.GreaterOrEqual(t, n, p.MaxAttempts)
	require.GreaterOrEqual(t, age, p.DeadLetterAfter)
	require.Less(t, age, p.DeadLetterAfter+p.Max, "and not much later")
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	ok := RetryPolicy{Base: time.Second, Max: time.Second, MaxAttempts: 1}
	require.NoError(t, ok.Validate())
	for _, bad := range []RetryPolicy{
		{Base: 0, Max: time.Second, MaxAttempts: 1},
		{Base: time.Second, Max: time.Millisecond, MaxAttempts: 1},
		{Base: time.Second, Max: time.Second, MaxAttempts: 0},
		{Base: time.Second, Max: time.Second, MaxAttempts: 1, DeadLetterAfter: -1},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
}
