package senders

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

var (
	errDown    = fmt.Errorf("503: %w", notify.ErrProviderUnavailable)
	errOneSMS  = errors.New("this SMS failed")
	errRefused = fmt.Errorf("400: %w", notify.ErrPermanent)
)

// send asks b for user and reports err; it returns whether the send was allowed, counted.
func send(t *testing.T, b *Breaker, user int64, err error) (allowed, counted bool) {
	t.Helper()
	done, counted, hold, aerr := b.Allow(user)
	if aerr != nil {
		require.ErrorIs(t, aerr, ErrBreakerOpen)
		require.Positive(t, hold, "a refused send is told how long to wait")
		return false, false
	}
	done(err)
	return true, counted
}

func TestBreakerOpensOnlyForManyUsers(t *testing.T) {
	t.Parallel()
	b := NewBreaker(BreakerConfig{Failures: 3, Open: 40 * time.Millisecond, OpenMax: 100 * time.Millisecond})
	// One user failing over and over (a poisoned number) never opens it.
	for range 20 {
		allowed, counted := send(t, b, 1, errDown)
		require.True(t, allowed)
		require.True(t, counted, "a closed breaker lets failures spend attempts")
	}
	require.Equal(t, "closed", b.State().State)
	// Failures that are one SMS's own, and permanent refusals, say nothing against the provider.
	for u := int64(10); u < 20; u++ {
		send(t, b, u, errOneSMS)
		send(t, b, u+100, errRefused)
	}
	require.Equal(t, "closed", b.State().State)
	// A success in between restarts the count.
	send(t, b, 2, errDown)
	send(t, b, 3, nil)
	send(t, b, 4, errDown)
	require.Equal(t, "closed", b.State().State)
	// Three different users in a row: open.
	send(t, b, 5, errDown)
	send(t, b, 6, errDown)
	st := b.State()
	require.Equal(t, "open", st.State)
	require.EqualValues(t, 1, st.Opened)
	require.NotNil(t, st.RetryAt)
	require.Contains(t, st.LastError, "503")
	allowed, _ := send(t, b, 7, nil)
	require.False(t, allowed, "open: nothing goes")
}

// A 409 (a send under the key still in progress) is an answer: the provider is up. It
// restarts the count of provider-wide failures, like a success, and never opens the breaker.
func TestBreakerTakesInProgressForAnAnswer(t *testing.T) {
	t.Parallel()
	errBusy := fmt.Errorf("409: %w", notify.ErrInProgress)
	b := NewBreaker(BreakerConfig{Failures: 2, Open: time.Minute, OpenMax: time.Minute})
	for u := int64(1); u <= 10; u++ {
		send(t, b, u, errDown)
		send(t, b, u+100, errBusy)
	}
	require.Equal(t, "closed", b.State().State, "each 409 between the failures showed the provider up")
	for u := int64(200); u < 210; u++ {
		send(t, b, u, errBusy)
	}
	require.Equal(t, "closed", b.State().State)
}

func TestBreakerProbesWithGrowingPausesThenCloses(t *testing.T) {
	t.Parallel()
	b := NewBreaker(BreakerConfig{Failures: 2, Open: 20 * time.Millisecond, OpenMax: 50 * time.Millisecond})
	send(t, b, 1, errDown)
	send(t, b, 2, errDown)
	require.Equal(t, "open", b.State().State)
	opened := time.Now()
	wait.Until(t, 5*time.Second, "the breaker's pause to end", func() bool { return b.Wait() == 0 })
	require.GreaterOrEqual(t, time.Since(opened), 20*time.Millisecond)
	require.True(t, b.HalfOpen())

	// Half-open: one probe at a time, and its failure spends no attempt.
	done, counted, _, err := b.Allow(3)
	require.NoError(t, err)
	require.False(t, counted, "a probe spends no attempt")
	_, _, _, err = b.Allow(4)
	require.ErrorIs(t, err, ErrBreakerOpen, "one probe at a time")
	done(errDown)
	require.Equal(t, "open", b.State().State, "the failed probe reopens it")
	reopened := time.Now()
	wait.Until(t, 5*time.Second, "the breaker's pause to end", func() bool { return b.Wait() == 0 })
	require.GreaterOrEqual(t, time.Since(reopened), 40*time.Millisecond, "for twice the pause")

	// The pause stops growing at OpenMax.
	allowed, _ := send(t, b, 5, errDown)
	require.True(t, allowed)
	reopened = time.Now()
	wait.Until(t, 5*time.Second, "the breaker's pause to end", func() bool { return b.Wait() == 0 })
	require.GreaterOrEqual(t, time.Since(reopened), 50*time.Millisecond)
	require.Less(t, b.State().Since.Sub(reopened), time.Second)

	// A successful probe closes it; sends count again.
	allowed, counted = send(t, b, 6, nil)
	require.True(t, allowed)
	require.False(t, counted)
	st := b.State()
	require.Equal(t, "closed", st.State)
	require.EqualValues(t, 3, st.Opened)
	_, counted = send(t, b, 7, errDown)
	require.True(t, counted)
}

// A breaker configured with nothing runs with DefaultBreakerConfig, the defaults the
// notifier's settings offer too.
func TestBreakerDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, DefaultBreakerConfig, NewBreaker(BreakerConfig{}).cfg)
	b := NewBreaker(BreakerConfig{Open: 10 * time.Second})
	require.Equal(t, 10*time.Second, b.cfg.OpenMax, "an OpenMax below Open grows to Open")
	require.Equal(t, 10*time.Second, b.Hold(), "a closed breaker holds a failed probe for the open pause")
}

func TestBreakerIsSafeForConcurrentSends(t *testing.T) {
	t.Parallel()
	b := NewBreaker(BreakerConfig{Failures: 5, Open: 10 * time.Millisecond})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 200 {
				err := errDown
				if i%3 == 0 {
					err = nil
				}
				if done, _, _, aerr := b.Allow(int64(w*1000 + i)); aerr == nil {
					done(err)
				}
				_ = b.State()
			}
		})
	}
	wg.Wait()
}
