package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func largest(n int64) int64 { return n - 1 }
func lowest(int64) int64    { return 0 }

func TestDelay(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	var prev time.Duration
	for attempt := 1; attempt <= 10; attempt++ {
		hi, lo := p.Delay(attempt, largest), p.Delay(attempt, lowest)
		require.GreaterOrEqual(t, lo, p.Base)
		require.LessOrEqual(t, hi, p.Max)
		require.LessOrEqual(t, lo, hi)
		require.GreaterOrEqual(t, hi, prev, "grows with the attempts")
		prev = hi
	}
	require.Equal(t, 10*time.Millisecond, p.Delay(1, largest))
	require.Equal(t, 20*time.Millisecond, p.Delay(2, largest))
	require.Equal(t, 80*time.Millisecond, p.Delay(4, largest))
	require.Equal(t, 40*time.Millisecond, p.Delay(4, lowest))
	require.Equal(t, 80*time.Millisecond, p.Delay(4, nil))

	huge := Policy{Base: time.Second, Max: time.Duration(1<<63 - 1)}
	require.Positive(t, huge.Delay(200, largest), "no overflow")
	require.Equal(t, time.Duration(0), Policy{}.Delay(3, largest))
}
