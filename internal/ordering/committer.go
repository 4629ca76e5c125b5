package ordering

import (
	"context"
	"log/slog"
	"sync"
	"time"

	retry "github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// markTimeout bounds one marking statement.
const markTimeout = 10 * time.Second

// committer marks the records every pump's broker confirmed published, through one shared
// writer: what arrives within a short linger of the first waiting confirmation (or until
// maxRows records wait) becomes one Outbox.MarkPublished statement, so per-queue pumps do not
// add a commit per queue. A pump hands its confirmations over and goes on sending; its done
// function is called once they are marked (or given up on, when the lead ends). Start takes
// the lead's context; Stop tells it nothing more will be submitted, and returns once what
// waits is marked.
type committer struct {
	*lifecycle.Runner
	lctx    context.Context // the lead: while it lasts, failed statements are retried
	outbox  Outbox
	linger  time.Duration
	maxRows int
	log     *slog.Logger
	policy  retry.Policy

	signal chan struct{}

	mu      sync.Mutex
	waiting []markRequest
	rows    int
}

type markRequest struct {
	recs []Published
	done func(error)
	at   time.Time
}

func newCommitter(outbox Outbox, linger time.Duration, maxRows int, log *slog.Logger, policy retry.Policy) *committer {
	c := &committer{outbox: outbox, linger: linger, maxRows: maxRows, log: log, policy: policy, signal: make(chan struct{}, 1)}
	c.Runner = lifecycle.NewRunner(c.run)
	return c
}

// Start starts marking, for the lead lctx.
func (c *committer) Start(lctx context.Context) error {
	c.lctx = lctx
	return c.Runner.Start(lctx)
}

// submit hands recs over to be marked; it never blocks. done (which must not block) is
// called with nil once they are marked.
func (c *committer) submit(recs []Published, done func(error)) {
	c.mu.Lock()
	c.waiting = append(c.waiting, markRequest{recs: recs, done: done, at: time.Now()})
	c.rows += len(recs)
	c.mu.Unlock()
	c.wake()
}

func (c *committer) wake() {
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// run marks what is submitted until ctx ends (Stop: nothing more will be submitted), then
// marks what waits and returns. While the lead lasts, a failed statement is retried with
// backoff; after it ends, each group gets one more attempt, so a relay that stops still
// marks what it sent.
func (c *committer) run(ctx context.Context) error {
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
		if rows < c.maxRows && !closed {
			if wait := time.Until(first.Add(c.linger)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-c.signal: // more arrived: look again
					t.Stop()
					continue
				case <-ctx.Done(): // stopping: mark what waits now
					t.Stop()
				}
			}
		}
		c.flush(c.lctx, c.take())
	}
}

// take removes whole requests from the waiting list, up to maxRows records (at least one
// request).
func (c *committer) take() []markRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows, n := 0, 0
	for n < len(c.waiting) && (n == 0 || rows+len(c.waiting[n].recs) <= c.maxRows) {
		rows += len(c.waiting[n].recs)
		n++
	}
	group := c.waiting[:n:n]
	c.waiting = c.waiting[n:]
	c.rows -= rows
	return group
}

func (c *committer) flush(lctx context.Context, group []markRequest) {
	var recs []Published
	for _, g := range group {
		recs = append(recs, g.recs...)
	}
	var err error
	for attempt := 1; ; attempt++ {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(lctx), markTimeout)
		err = c.outbox.MarkPublished(mctx, recs)
		cancel()
		if err == nil || lctx.Err() != nil {
			break
		}
		c.log.Warn("relay cannot mark records published; retrying", "records", len(recs), "err", err, "attempt", attempt)
		t := time.NewTimer(c.policy.Delay(attempt, nil))
		select {
		case <-lctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if err != nil {
		// The lead ended: they stay unpublished in the outbox, and whoever leads next sends
		// them again (the consumer drops the copies).
		c.log.Warn("relay gave up marking records published", "records", len(recs), "err", err)
	}
	for _, g := range group {
		g.done(err)
	}
}
