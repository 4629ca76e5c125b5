// Package backoff is the project's one retry delay policy: capped exponential backoff with
// equal jitter. It is a pure function of the attempt number, so that a delay can be computed
// again by whichever process resumes the work (a saga's attempts are stored in Postgres),
// and its randomness is injected, so that tests can pin it.
package backoff

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is a capped exponential backoff: Base before the second attempt, doubling up to Max.
type Policy struct {
	Base, Max time.Duration
}

// Delay is how long to wait after attempt (1-based) failed: Base·2^(attempt-1), capped at
// Max, of which half is fixed and half drawn by jitter(n), which returns a number in [0, n);
// never below Base. A nil jitter takes the largest value (no randomness).
func (p Policy) Delay(attempt int, jitter func(int64) int64) time.Duration {
	base, ceiling := max(p.Base, 0), max(p.Max, p.Base, 0)
	exp := base
	for i := 1; i < attempt && exp < ceiling; i++ {
		if exp > ceiling/2 {
			exp = ceiling
			break
		}
		exp *= 2
	}
	exp = min(exp, ceiling)
	half := exp / 2
	r := int64(exp - half)
	if jitter != nil {
		r = jitter(r + 1)
	}
	return min(max(half+time.Duration(r), base), ceiling)
}

// RetryAfter reads an HTTP Retry-After header (RFC 9110: delay-seconds, or an HTTP date) as
// the least wait the server asked for, at most ceiling: absent, unreadable, zero, negative or
// in the past is 0 (the caller's own backoff); beyond ceiling (however large, even past what a
// time.Duration holds) is ceiling. now is when the answer came, for a date.
func RetryAfter(v string, now time.Time, ceiling time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" || ceiling <= 0 {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(ceiling/time.Second) {
			return ceiling
		}
		d = time.Duration(secs) * time.Second
	} else if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		return ceiling // more seconds than an int64 holds
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), ceiling)
}
