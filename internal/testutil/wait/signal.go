package wait

import (
	"sync"
	"testing"
	"time"
)

// For waits until ch is closed or sends, and returns how long that took; if timeout passes
// first, it fails the test, naming what it waited for. Use it for a signal the code raises
// (a Runner's Started or Stopped, a hook the test set). Call it from the test's goroutine.
func For(t testing.TB, timeout time.Duration, what string, ch <-chan struct{}) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-ch:
		return time.Since(start)
	case <-deadline.C:
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		return 0
	}
}

// Signal is raised by the code a test watches each time what the test waits for may have
// changed: a fake the code calls, or a hook it calls back. Raise closes the channel Next
// returned, so it wakes every waiter; wait on it with On(…, s.Next, …). The zero Signal is
// ready to use.
type Signal struct {
	mu   sync.Mutex
	next chan struct{} // closed by the next Raise; nil while nobody waits
}

// Raise wakes everyone waiting on s.
func (s *Signal) Raise() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		close(s.next)
		s.next = nil
	}
}

// Next returns a channel closed by the next Raise.
func (s *Signal) Next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = make(chan struct{})
	}
	return s.next
}

// On checks cond now and each time the channel next returned is closed, until it holds, and
// returns how long that took; if timeout passes first, it fails the test, naming what it
// waited for. next is a Signal's Next, or a method of the code's own that returns a channel
// closed at its next change (a breaker's Changed). cond must only turn true by something
// that then closes that channel. Call it from the test's goroutine.
func On(t testing.TB, timeout time.Duration, what string, next func() <-chan struct{}, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		raised := next() // before cond: a change between the two is not missed
		if cond() {
			return time.Since(start)
		}
		select {
		case <-raised:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
			return 0
		}
	}
}
