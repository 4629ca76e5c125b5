// Package groupcommit gathers the writes that many goroutines submit into few statements: a
// group is written once its first request has waited a short linger (or as soon as MaxRows
// rows wait), so that at moderate load several queues' or workers' writes share one commit
// instead of each paying its own, while at high load the writers' own statement time fills
// the groups without any linger. The caller's write function writes a group and answers
// each request; a committer only decides when, and with whom, a request is written.
package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// Config tunes a Committer.
type Config struct {
	// Linger is how long the first request of a group waits for company (default 2ms). It is
	// the latency a lone request pays at low load.
	Linger time.Duration
	// MaxRows ends the linger at once, and caps a group (default 256). A request counts the
	// rows it was submitted with; a group holds at least one request, whatever its rows.
	MaxRows int
	// Writers is how many groups are written at once (default 1). While all are busy,
	// requests gather into the next group.
	Writers int
	// Counters is where the committer counts what it writes (nil: counters of its own).
	// Committers that succeed each other (one per lead, say) share one to count as one
	// writer.
	Counters *Counters
}

// Counters counts the groups committers wrote, and the requests and rows those held. The
// zero value is ready; it is safe for concurrent use.
type Counters struct {
	groups, requests, rows atomic.Int64
}

// Stats is what Counters counted.
type Stats struct {
	// Groups is how many groups were handed to the write function (counted before it is
	// called, so a request answered is counted). The caller may write a group in more than
	// one statement (to isolate a row the database refuses, say).
	Groups int64
	// Requests and Rows are what those groups held: Rows ÷ Groups is how many rows share a
	// write.
	Requests, Rows int64
}

// Stats returns what c counted.
func (c *Counters) Stats() Stats {
	return Stats{Groups: c.groups.Load(), Requests: c.requests.Load(), Rows: c.rows.Load()}
}

// Committer writes what is submitted to it in groups, through write, until Stop. Stop writes
// what waits, waits for the groups being written, and returns. It is safe for concurrent
// use.
type Committer[T any] struct {
	*lifecycle.Runner
	cfg   Config
	write func(ctx context.Context, group []T)

	signal chan struct{}
	slots  chan struct{}

	mu      sync.Mutex
	waiting []entry[T]
	rows    int
}

// Stats returns what c wrote, counted in its Config's Counters.
func (c *Committer[T]) Stats() Stats { return c.cfg.Counters.Stats() }

type entry[T any] struct {
	req  T
	rows int
	at   time.Time
}

// New returns a committer whose groups write calls, with a context that is not cancelled by
// Stop (write bounds its own statements). write must answer every request of its group.
func New[T any](cfg Config, write func(ctx context.Context, group []T)) *Committer[T] {
	if cfg.Linger <= 0 {
		cfg.Linger = 2 * time.Millisecond
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = 256
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 1
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	c := &Committer[T]{cfg: cfg, write: write, signal: make(chan struct{}, 1), slots: make(chan struct{}, cfg.Writers)}
	c.Runner = lifecycle.NewRunner(c.run)
	return c
}

// Submit hands req, of rows rows, over to be written; it never blocks. Requests submitted
// before Stop are written; the caller must not submit after Stop has returned.
func (c *Committer[T]) Submit(req T, rows int) {
	c.mu.Lock()
	c.waiting = append(c.waiting, entry[T]{req: req, rows: rows, at: time.Now()})
	c.rows += rows
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// run groups what is submitted until ctx ends (Stop), then writes what waits, waits for the
// writers, and returns.
func (c *Committer[T]) run(ctx context.Context) error {
	wctx := context.WithoutCancel(ctx)
	var writing sync.WaitGroup
	defer writing.Wait()
	for {
		closed := ctx.Err() != nil
		c.mu.Lock()
		n, rows := len(c.waiting), c.rows
		var first time.Time
		if n > 0 {
			first = c.waiting[0].at
		}
		c.mu.Unlock()
		if n == 0 {
			if closed {
				return nil
			}
			select {
			case <-c.signal:
			case <-ctx.Done():
			}
			continue
		}
		if rows < c.cfg.MaxRows && !closed {
			if wait := time.Until(first.Add(c.cfg.Linger)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-c.signal: // more arrived: look again
					t.Stop()
					continue
				case <-ctx.Done(): // stopping: write what waits now
					t.Stop()
				}
			}
		}
		// A free writer: while none is, requests keep gathering into this group.
		c.slots <- struct{}{}
		group, rows := c.take()
		c.cfg.Counters.groups.Add(1)
		c.cfg.Counters.requests.Add(int64(len(group)))
		c.cfg.Counters.rows.Add(int64(rows))
		writing.Add(1)
		go func() {
			defer func() {
				<-c.slots
				writing.Done()
			}()
			c.write(wctx, group)
		}()
	}
}

// take removes whole requests from the waiting list, up to MaxRows rows (at least one
// request), and returns them with their rows.
func (c *Committer[T]) take() ([]T, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows, n := 0, 0
	for n < len(c.waiting) && (n == 0 || rows+c.waiting[n].rows <= c.cfg.MaxRows) {
		rows += c.waiting[n].rows
		n++
	}
	group := make([]T, n)
	for i := range n {
		group[i] = c.waiting[i].req
		c.waiting[i] = entry[T]{} // the list's array outlives the request
	}
	c.waiting = c.waiting[n:]
	c.rows -= rows
	return group, rows
}
