// The recorder: the workers' outcomes grouped into few record statements, retried and isolated.

package gate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/puddle/v2"

	"github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/pg"
)

// commitReq is one user's outcomes waiting to be recorded, and where to answer.
type commitReq struct {
	outs  []outcome
	reply chan commitRes
}

// commitRes answers a commitReq: what the store answered for the user, and the outcomes it
// recorded — the request's own, or, when the database refused one of them, those before it
// and the refused one's replacement (see recordAlone).
type commitRes struct {
	r    recorded
	outs []outcome
	err  error
}

// recordBackoff spaces a user's record attempts.
var recordBackoff = backoff.Policy{Base: 200 * time.Millisecond, Max: 2 * time.Second}

// commit records one user's outcomes under the claim's fence through the committers and
// waits, trying up to RecordAttempts times while the failure may pass (River's completer
// does the same: a closed pool, a cancelled context or data the database refuses are not
// tried again). ok is false when nothing more is to be done with the user: another lane
// claimed it (nothing was recorded), the record could not be made (the user is given back,
// to be claimed again under a new fence: its SMS is then sent again under the same provider
// key), or the process stops.
func (l *Lanes) commit(stop, ctx context.Context, c claim, outs []outcome) (commitRes, bool) {
	for i := range outs {
		outs[i].Fence = c.At.Fence
	}
	o := outs[0]
	for attempt := 1; ; attempt++ {
		reply := make(chan commitRes, 1)
		l.recorder.Submit(commitReq{outs: outs, reply: reply}, len(outs))
		res := <-reply
		if res.err == nil {
			if !res.r.Held {
				l.fenced.Add(1)
				l.log.Warn("outcome not recorded: the user was claimed again under a new fence", "user_id", o.UserID, "seq", o.Seq, "verdict", o.Verdict)
				// A no-op unless an earlier attempt of this record committed and its
				// answer was lost.
				l.giveBack(ctx, c, true)
				return commitRes{}, false
			}
			return res, true
		}
		l.recordFailures.Add(1)
		if attempt >= l.cfg.RecordAttempts || !recordRetryable(res.err) {
			l.recordsGivenUp.Add(1)
			l.log.Error("recording an outcome failed; giving the user back, to be claimed again under a new fence",
				"user_id", o.UserID, "seq", o.Seq, "attempts", attempt, "err", res.err)
			l.giveBack(ctx, c, true)
			return commitRes{}, false
		}
		l.log.Warn("recording an outcome failed; retrying", "user_id", o.UserID, "seq", o.Seq, "attempt", attempt, "err", res.err)
		t := time.NewTimer(recordBackoff.Delay(attempt, rand.Int64N))
		select {
		case <-t.C:
		case <-stop.Done():
			t.Stop()
			l.giveBack(ctx, c, true)
			return commitRes{}, false
		}
	}
}

// Recorder tuning. recordWriters is how many record statements the lanes run at once. One
// would serialise the lanes behind it: on a machine whose CPUs the wallet's busy backends
// share, a record of a few hundred outcomes can take a second, and every worker waits for it.
// Records of one process never touch the same user (each user is held by one worker), so they
// do not wait for each other. A lone worker's outcomes wait at most recordLinger for other
// workers' to share their statement (at moderate load each worker records on its own
// otherwise: a commit per SMS); a statement holds at most recordMaxRows outcomes.
const (
	recordWriters = 4
	recordLinger  = 2 * time.Millisecond
	recordMaxRows = 1024
)

// newRecorder returns the lanes' recorder: it records the outcomes of all workers in groups,
// those that wait together within recordLinger (or until recordMaxRows), each group in one
// statement, so a thousand SMS a second cost tens of commits, not a thousand. Stop, once no
// worker hands outcomes over any more, lets it record what is left and return.
func (l *Lanes) newRecorder() *groupcommit.Committer[commitReq] {
	return groupcommit.New(groupcommit.Config{Linger: recordLinger, MaxRows: recordMaxRows, Writers: recordWriters}, l.recordBatch)
}

// recordBatch records the outcomes of batch in one statement and answers each request. A
// statement the database refuses for the data of a row is split in halves, and each half
// recorded on its own, until the row's user is alone (recordAlone): one user's bad row never
// holds the others' records.
func (l *Lanes) recordBatch(ctx context.Context, batch []commitReq) {
	var outs []outcome
	for _, r := range batch {
		outs = append(outs, r.outs...)
	}
	got, err := l.recordOnce(ctx, outs)
	if err != nil && refusedData(err) {
		if len(batch) > 1 {
			l.recordBatch(ctx, batch[:len(batch)/2])
			l.recordBatch(ctx, batch[len(batch)/2:])
			return
		}
		batch[0].reply <- l.recordAlone(ctx, batch[0].outs, err)
		return
	}
	for _, r := range batch {
		r.reply <- commitRes{r: got[r.outs[0].UserID], outs: r.outs, err: err}
	}
}

// recordOnce is one attempt of a record statement, bounded by RecordTimeout.
func (l *Lanes) recordOnce(ctx context.Context, outs []outcome) (map[int64]recorded, error) {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RecordTimeout)
	defer cancel()
	l.records.Add(1)
	return l.store.record(rctx, l.cfg.Lease, l.runLen(), outs)
}

// recordAlone records one user's outcomes after the database refused them for their data:
// a run of several one by one, to find the refused one, whose predecessors are recorded; the
// refused one is recorded as a failed attempt whose reason is the refusal (refusedOutcome),
// which an operator sees as the SMS's last error. Outcomes after it are dropped: only a
// journaled sender has runs, and its delivery is the record, so they are sent later.
func (l *Lanes) recordAlone(ctx context.Context, outs []outcome, refusal error) commitRes {
	var done commitRes
	for _, o := range outs {
		err := refusal
		if len(outs) > 1 {
			var got map[int64]recorded
			if got, err = l.recordOnce(ctx, []outcome{o}); err == nil {
				if done.r = got[o.UserID]; !done.r.Held {
					return done
				}
				done.outs = append(done.outs, o)
				continue
			}
		}
		if refusedData(err) {
			why := err
			sub := l.refusedOutcome(o, why)
			var got map[int64]recorded
			if got, err = l.recordOnce(ctx, []outcome{sub}); err == nil {
				if done.r = got[o.UserID]; done.r.Held {
					l.recordsRefused.Add(1)
					l.log.Error("the database refused an outcome; recorded as a failed attempt instead",
						"user_id", o.UserID, "seq", o.Seq, "verdict", o.Verdict, "recorded", sub.Verdict, "err", why)
					done.outs = append(done.outs, sub)
				}
				return done
			}
		}
		if len(done.outs) == 0 {
			return commitRes{err: err}
		}
		return done // what was recorded: the worker goes on from there
	}
	return done
}

// refusedOutcome replaces an outcome the database refused: the same SMS, a failed attempt
// whose error is the refusal, decided by the retry policy as a failed send is — retried, and
// dead-lettered once its attempts and window are spent — so it never wedges its user.
func (l *Lanes) refusedOutcome(o outcome, refusal error) outcome {
	d := l.cfg.Policy.Decide(Attempt{Prior: max(o.Attempts-1, 0), Age: o.Age,
		Err: fmt.Errorf("the database refused to record it as %s: %w", o.Verdict, refusal)}, rand.Int64N)
	return outcome{UserID: o.UserID, Seq: o.Seq, Verdict: d.Verdict, Attempts: d.Attempts, Delay: d.Delay,
		Reason: d.Reason, Fence: o.Fence, Age: o.Age}
}

// refusedData reports whether the database refused a statement for the data of its rows: a
// data exception (SQLSTATE class 22: text that is not UTF-8 or holds a NUL, a value out of
// range) or an integrity constraint violation (class 23). Such a statement fails the same
// way however often it is tried.
func refusedData(err error) bool {
	code := pg.Code(err)
	return code != "" && (pgerrcode.IsDataException(code) || pgerrcode.IsIntegrityConstraintViolation(code))
}

// recordRetryable reports whether a failed record may succeed if tried again: not when its
// context was cancelled or the pool is closed (both will fail again at once), nor when the
// database refused its data. A timeout, a lost connection, a deadlock may pass.
func recordRetryable(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, puddle.ErrClosedPool) && !refusedData(err)
}
