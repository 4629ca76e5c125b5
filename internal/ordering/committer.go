package ordering

import (
	"context"
	"log/slog"
	"time"

	retry "github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
)

// markTimeout bounds one marking statement.
const markTimeout = 10 * time.Second

// committer marks the records every pump's broker confirmed published, through one shared
// writer (a groupcommit.Committer): what arrives within a short linger of the first waiting
// confirmation (or until maxRows records wait) becomes one Outbox.MarkPublished statement, so
// per-queue pumps do not add a commit per queue. A pump hands its confirmations over and
// goes on sending; its done function is called once they are marked (or given up on, when
// the lead ends). It runs for one lead (lctx): while the lead lasts, a failed statement is
// retried with backoff; once it has ended, each group gets one more attempt, so a relay that
// stops still marks what it sent. Stop returns once what waits is marked.
type committer struct {
	*groupcommit.Committer[markRequest]
}

type markRequest struct {
	recs []Published
	done func(error)
}

func newCommitter(lctx context.Context, outbox Outbox, linger time.Duration, maxRows int, counters *groupcommit.Counters, log *slog.Logger, policy retry.Policy) *committer {
	return &committer{groupcommit.New(groupcommit.Config{Linger: linger, MaxRows: maxRows, Counters: counters},
		func(_ context.Context, group []markRequest) { mark(lctx, outbox, log, policy, group) })}
}

// submit hands recs over to be marked; it never blocks. done (which must not block) is
// called with nil once they are marked.
func (c *committer) submit(recs []Published, done func(error)) {
	c.Submit(markRequest{recs: recs, done: done}, len(recs))
}

// mark marks a group's records in one statement, retrying while the lead lctx lasts, and
// tells each request how it went.
func mark(lctx context.Context, outbox Outbox, log *slog.Logger, policy retry.Policy, group []markRequest) {
	var recs []Published
	for _, g := range group {
		recs = append(recs, g.recs...)
	}
	var err error
	for attempt := 1; ; attempt++ {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(lctx), markTimeout)
		err = outbox.MarkPublished(mctx, recs)
		cancel()
		if err == nil || lctx.Err() != nil {
			break
		}
		log.Warn("relay cannot mark records published; retrying", "records", len(recs), "err", err, "attempt", attempt)
		t := time.NewTimer(policy.Delay(attempt, nil))
		select {
		case <-lctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if err != nil {
		// The lead ended: they stay unpublished in the outbox, and whoever leads next sends
		// them again (the consumer drops the copies).
		log.Warn("relay gave up marking records published", "records", len(recs), "err", err)
	}
	for _, g := range group {
		g.done(err)
	}
}
