package wait_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var polls atomic.Int64
	took := wait.Until(t, 5*time.Second, "the third poll", func() bool { return polls.Add(1) == 3 })
	require.EqualValues(t, 3, polls.Load())
	require.Less(t, took, 5*time.Second)
}

// fatalT records a Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestUntilFailsTheTestAtItsDeadline(t *testing.T) {
	t.Parallel()
	ft := &fatalT{TB: t}
	func() {
		defer func() { require.Equal(t, ft, recover()) }()
		wait.Until(ft, 50*time.Millisecond, "nothing", func() bool { return false })
	}()
	require.Equal(t, "timed out after %s waiting for %s", ft.failed)
}

func TestForReturnsOnTheSignalAndFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	ch := make(chan struct{})
	go close(ch)
	require.Less(t, wait.For(t, 5*time.Second, "the close", ch), 5*time.Second)

	ft := &fatalT{TB: t}
	func() {
		defer func() { require.Equal(t, ft, recover()) }()
		wait.For(ft, 50*time.Millisecond, "nothing", make(chan struct{}))
	}()
	require.Equal(t, "timed out after %s waiting for %s", ft.failed)
}

// On checks its condition after each Raise, and only then: a condition that turns true
// without a Raise is not seen until the next one, or the deadline.
func TestOnChecksOnEachRaise(t *testing.T) {
	t.Parallel()
	var s wait.Signal
	var n atomic.Int64
	var checks atomic.Int64
	go func() {
		for range 3 {
			n.Add(1)
			s.Raise()
		}
	}()
	wait.On(t, 5*time.Second, "three raises", s.Next, func() bool { checks.Add(1); return n.Load() == 3 })
	require.EqualValues(t, 3, n.Load())
	require.LessOrEqual(t, checks.Load(), int64(4), "checked once at first and at most once per raise")

	ft := &fatalT{TB: t}
	func() {
		defer func() { require.Equal(t, ft, recover()) }()
		wait.On(ft, 50*time.Millisecond, "a raise that never comes", s.Next, func() bool { return false })
	}()
	require.Equal(t, "timed out after %s waiting for %s", ft.failed)
}
