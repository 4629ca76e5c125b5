// Package wait is how tests wait, always with a deadline: on a signal the code raises (For,
// and On with a Signal), or, for what only the outside can see (another process's rows, a
// child's HTTP endpoint, the broker), by polling a condition until it holds (Until).
package wait

import (
	"testing"
	"time"
)

// The pause between two polls starts at firstStep and grows to maxStep: a condition that
// holds soon is seen soon, and one that takes seconds costs few polls.
const (
	firstStep = 10 * time.Millisecond
	maxStep   = 100 * time.Millisecond
)

// Until polls cond until it returns true and returns how long that took; if timeout passes
// first, it fails the test, naming what it waited for. Call it from the test's goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	step := firstStep
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(step) // between two polls, under the deadline above
		step = min(step*3/2, maxStep)
	}
	return time.Since(start)
}
