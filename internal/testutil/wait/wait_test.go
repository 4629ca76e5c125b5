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
