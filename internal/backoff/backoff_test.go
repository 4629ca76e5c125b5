package backoff

import (
	"net/http"
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

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const ceiling = 5 * time.Minute
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"1.5", 0},
		{"300", ceiling},
		{"301", ceiling},
		{"86400", ceiling},
		{"9223372036854775807", ceiling},
		{"99999999999999999999999", ceiling},
		{"-99999999999999999999999", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(24 * time.Hour).Format(http.TimeFormat), ceiling},
	} {
		require.Equal(t, tc.want, RetryAfter(tc.v, now, ceiling), "Retry-After: %q", tc.v)
	}
	require.Equal(t, time.Duration(0), RetryAfter("7", now, 0), "no ceiling: no wait")
	require.Equal(t, 500*time.Millisecond, RetryAfter("7", now, 500*time.Millisecond))
}
