package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
)

// freezeNotifierFault (freeze-notifier) slows the SMS provider down for a few seconds, so that
// a notifier has sends in flight and users leased, then stops that notifier with SIGSTOP for
// the fault's Down, longer than its lane lease, so a replica claims its users, and resumes it
// with SIGCONT. Its report says when a replica served the users it held, and what its lanes
// did when they resumed: outcomes refused by the fence, sends refused by the lease check, the
// provider's replayed answers for keys it had delivered and its 409s for keys it was still
// delivering.
var freezeNotifierFault = faultAction{
	inject: (*chaosRun).freezeNotifier,
	report: (*chaosRun).reportFrozenNotifier,
}

// freezeNotifier carries out a freeze-notifier fault.
func (r *chaosRun) freezeNotifier(ctx context.Context, f Fault, e *executed) {
	// A real SMS gateway takes a few hundred milliseconds to answer: slowed down so for
	// a few seconds before the freeze (and until the notifier holds a lease), the
	// notifier has sends in flight and users leased when it stops, whose outcomes it
	// then holds while a replica takes the users over.
	r.sms.SetDelay(slowProvider)
	sleep(ctx, slowBeforeFreeze)
	for deadline := time.Now().Add(slowAtMost - slowBeforeFreeze); time.Now().Before(deadline) && ctx.Err() == nil; {
		if leased, err := r.leasedUsers(ctx, f.Slot); err == nil && len(leased) > 0 {
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	s := r.slots[f.Slot]
	e.logFrom = fileSize(s.logPath)
	var frozen bool
	frozen, e.err = s.freeze(ctx, f.Down, func() {
		r.sms.SetDelay(0)
		e.start = time.Now()
		var err error
		if e.leased, err = r.leasedUsers(ctx, f.Slot); err != nil {
			r.log.Warn("reading the frozen notifier's leases", "err", err)
		}
	})
	r.sms.SetDelay(0)
	e.skipped = !frozen && e.err == nil
}

// reportFrozenNotifier prints what became of the users a frozen notifier held, and adds it to
// the summary.
func (r *chaosRun) reportFrozenNotifier(ctx context.Context, e executed) {
	if !e.took() {
		return
	}
	t, err := MeasureTakeOver(ctx, r.ndb, e.leased, e.start, e.end)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	fenced, short := r.countLanesAfterFreeze(e)
	var replayed, inProgress int
	for _, c := range r.sms.Calls(func(c smsprovider.Call) bool { return !c.At.Before(e.start) && !c.At.After(e.end.Add(laneLease)) }) {
		switch {
		case c.Replayed:
			replayed++
		case c.Status == http.StatusConflict:
			inProgress++
		}
	}
	r.printf("      %d users leased by %s when it stopped (lease %s): the SMS it was sending of %d of them recorded by a replica before it resumed, %.1f–%.1fs after it stopped\n",
		t.Leased, e.Slot, laneLease, t.BeforeResume, t.First.Seconds(), t.Last.Seconds())
	r.printf("      after it resumed: %d outcomes not recorded (the fence had moved), %d users given back unsent (lease too short); from its stop to %s after it resumed, %d SMS answered as delivered before (replayed) and %d answered 409 (in progress, asked again)\n",
		fenced, short, laneLease, replayed, inProgress)
	r.summary = append(r.summary, fmt.Sprintf("freeze of %s for %.0fs: %d of its %d leased users taken over by a replica before it resumed; then %d outcomes refused by the fence, %d sends refused by the lease check",
		e.Slot, e.Down.Seconds(), t.BeforeResume, t.Leased, fenced, short))
}

// countLanesAfterFreeze counts, in a frozen notifier's log from where it stood when it
// stopped to its next start (if it was restarted since), the outcomes its lanes could not
// record because the fence had moved, and the users they gave back unsent because their
// lease had too little left.
func (r *chaosRun) countLanesAfterFreeze(e executed) (fenced, short int) {
	f, err := os.Open(r.slots[e.Slot].logPath)
	if err != nil {
		return 0, 0
	}
	defer f.Close() //nolint:errcheck // read only
	if _, err := f.Seek(e.logFrom, io.SeekStart); err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "==== "+e.Slot+" start"):
			return fenced, short
		case strings.Contains(line, "claimed again under a new fence") && strings.Contains(line, "outcome not recorded"):
			fenced++
		case strings.Contains(line, "too little of its lease is left"):
			short++
		}
	}
	return fenced, short
}

// fileSize is the size of the file at path (0 if it cannot be read).
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// leasedUsers lists the users whose lane lease the notifier of slot holds now (its lanes
// name their leases after its CONSUMER_INSTANCE, the slot's name).
func (r *chaosRun) leasedUsers(ctx context.Context, slot string) ([]leasedUser, error) {
	rows, err := r.ndb.Query(ctx, `SELECT user_id, last_seq FROM notify.progress
		WHERE lane_owner LIKE '%/' || $1 AND lane_until > now() ORDER BY user_id`, slot)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[leasedUser])
}
