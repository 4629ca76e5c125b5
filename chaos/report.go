package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// reportProgress prints the pipeline's counts every interval until the returned func is called.
func (r *chaosRun) reportProgress(ctx context.Context, every time.Duration) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var events, published, sms, pending int
			err := r.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM wallet_events), (SELECT count(*) FROM wallet_events WHERE published_at IS NOT NULL)`).Scan(&events, &published)
			if err == nil {
				err = r.ndb.QueryRow(ctx, `SELECT (SELECT count(*) FROM notify.sms_log), (SELECT count(*) FROM notify.notifications WHERE status = 'pending')`).Scan(&sms, &pending)
			}
			if err != nil {
				r.printf("chaos: +%5.1fs progress: database: %s\n", time.Since(r.start).Seconds(), firstLine(err.Error()))
				continue
			}
			r.printf("chaos: +%5.1fs progress: events=%d published=%d sms=%d inbox_pending=%d\n", time.Since(r.start).Seconds(), events, published, sms, pending)
		}
	})
	return func() { close(done); wg.Wait() }
}

// measureInOneDatabase makes the notifier's database able to answer the measurements, which
// join the wallet's events with the notifier's records: with -notify-cluster it copies the
// events' keys, commit and publication times there (into a table of the run's own that neither service
// reads), once the pipeline is quiet. Sharing one database, it has nothing to do.
func (r *chaosRun) measureInOneDatabase(ctx context.Context) error {
	if r.ndb == r.db {
		return nil
	}
	rows, err := r.db.Query(ctx, `SELECT id, user_id, seq, occurred_at, published_at FROM wallet_events ORDER BY id`)
	if err != nil {
		return fmt.Errorf("reading the events to measure: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) {
		var id, user, seq int64
		var at time.Time
		var published *time.Time
		err := row.Scan(&id, &user, &seq, &at, &published)
		return []any{id, user, seq, at, published}, err
	})
	if err != nil {
		return fmt.Errorf("reading the events to measure: %w", err)
	}
	if _, err := r.ndb.Exec(ctx, `DROP TABLE IF EXISTS public.wallet_events;
		CREATE TABLE public.wallet_events (id bigint PRIMARY KEY, user_id bigint NOT NULL, seq bigint NOT NULL, occurred_at timestamptz NOT NULL, published_at timestamptz)`); err != nil {
		return fmt.Errorf("a table to measure in: %w", err)
	}
	if _, err := r.ndb.CopyFrom(ctx, pgx.Identifier{"public", "wallet_events"}, []string{"id", "user_id", "seq", "occurred_at", "published_at"}, pgx.CopyFromRows(events)); err != nil {
		return fmt.Errorf("copying the events to measure: %w", err)
	}
	r.printf("chaos: %d events copied beside the notifier's records to measure the faults\n", len(events))
	return nil
}

// reportImpacts prints, for each fault, how long it held the pipeline up.
func (r *chaosRun) reportImpacts(ctx context.Context) {
	if r.cfg.PruneInbox {
		// The reports join each event with its inbox row, which retention has pruned: say
		// how much of the inbox went, and measure nothing that would read as a miss.
		var events, left int
		if err := r.db.QueryRow(ctx, `SELECT count(*) FROM wallet_events`).Scan(&events); err != nil {
			r.printf("chaos: counting events: %v\n", err)
		}
		if err := r.ndb.QueryRow(ctx, `SELECT count(*) FROM notify.notifications`).Scan(&left); err != nil {
			r.printf("chaos: counting inbox rows: %v\n", err)
		}
		r.printf("chaos: -prune-inbox: %d inbox rows left of %d events (the rest pruned during the run); the per-fault reports are skipped, they need those rows\n", left, events)
		return
	}
	p50, p99, err := Baseline(ctx, r.ndb)
	if err != nil {
		r.printf("chaos: baseline: %v\n", err)
		return
	}
	r.printf("chaos: commit→SMS over the whole run: p50=%s p99=%s. Per fault: the longest time without any SMS in the minute after it, and the longest commit→SMS of events committed during it and the 20 s after:\n", p50, p99)
	r.mu.Lock()
	ex := slices.Clone(r.executed)
	r.mu.Unlock()
	slices.SortFunc(ex, func(a, b executed) int { return a.start.Compare(b.start) })
	for _, e := range ex {
		im, err := MeasureImpact(ctx, r.ndb, e.start, e.end)
		if err != nil {
			r.printf("  %s: %v\n", e.Fault, err)
			continue
		}
		outage := ""
		if !e.down.IsZero() && !e.up.IsZero() {
			var first time.Time
			if err := r.ndb.QueryRow(ctx, `SELECT COALESCE(min(sent_at), 'epoch') FROM notify.sms_log WHERE sent_at >= $1`, e.up).Scan(&first); err == nil && first.After(e.up) {
				outage = fmt.Sprintf("  port closed %5.1fs, first SMS %5.2fs after it reopened", e.up.Sub(e.down).Seconds(), first.Sub(e.up).Seconds())
			}
		}
		r.printf("  +%5.1fs %-40s lasted %5.1fs  sms_gap=%6.2fs  max_commit_to_sms=%6.2fs (%d events)%s\n",
			e.start.Sub(r.start).Seconds(), e.What(), e.end.Sub(e.start).Seconds(), im.LongestGap.Seconds(), im.MaxLatency.Seconds(), im.Events, outage)
		r.reportFault(ctx, e)
	}
	for _, line := range r.summary {
		r.printf("chaos: %s\n", line)
	}
}

func formatOps(ops map[string]int) string {
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, ops[k]))
	}
	return strings.Join(parts, " ")
}

// reportHeldUp adds, under the line of a broker's restart, crash or kill, whom the broker
// held up and whom it did not.
func (r *chaosRun) reportHeldUp(ctx context.Context, e executed) {
	name := e.Broker
	if name == "" {
		name = BrokerName(0)
	}
	back := e.up
	if back.IsZero() {
		back = e.end
	}
	died := e.down // the port closed: the broker was gone
	if died.IsZero() {
		died = e.start
	}
	bi, err := MeasureBrokerImpact(ctx, r.ndb, name, died, back)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	r.printf("      held up: %d users whose messages %s held waited up to %.2fs; everyone else: %d events, commit→SMS p99=%.2fs max=%.2fs\n",
		bi.Held, name, bi.HeldMax.Seconds(), bi.Others, bi.OthersP99.Seconds(), bi.OthersMax.Seconds())
}

// reportAddedQueues adds, under the line of a change that added queues (a join or a
// reshard), how soon those queues' messages became SMS.
func (r *chaosRun) reportAddedQueues(ctx context.Context, e executed) {
	broker, fromID := e.Broker, 0
	if e.Kind == Reshard {
		broker, fromID = "", r.cfg.Queues
	}
	ni, err := MeasureNewQueues(ctx, r.ndb, broker, fromID, e.end)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	if ni.FirstEvent < 0 {
		// Not a latency: nothing was committed on an added queue at all (the change did
		// not add any, or no key mapped there before the load ended).
		r.printf("      added queues: NO event on an added queue after the change\n")
		return
	}
	r.printf("      added queues: first event on one %.2fs after the change, first SMS from one %.2fs after it; %d events on them in the 30 s after, commit→SMS max=%.2fs\n",
		ni.FirstEvent.Seconds(), ni.FirstText.Seconds(), ni.Events, ni.Max.Seconds())
}
