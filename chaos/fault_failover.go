package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// failoverFault (failover) fails the wallet's Postgres over to its synchronous standby while
// the load runs: scripts/services.sh pg-failover stops the primary as after a crash
// (pg_ctl -m immediate), fences it and promotes the standby; pg-standby then rebuilds a
// standby from the new primary (pg_basebackup afresh), so that later faults and the audit
// have a cluster as before. Nothing restarts the services: their database URL names both
// nodes with target_session_attrs=read-write (see dbURL). It measures how long the database
// took no writes, and for each service process how long its readiness probe (a ping
// through its pool, which connects to the primary only) failed and that the same process
// answered again; a process that did not is a defect. The notifier's own cluster
// (-notify-cluster) is not failed over. The audit then holds the run to every count, and
// nothing may have been set aside as of a rewound history (see judgeRewinds).
var failoverFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.failover, e.err = r.failOver(ctx)
	},
	report: (*chaosRun).reportFailover,
}

// failoverResult is what a failover did, and how the services came through it.
type failoverResult struct {
	from, to int // ports of the old and the new primary
	// stop is when the old primary's port closed, promoted when the standby answered as a
	// primary (pg-failover returned), writable when a new connection through the services'
	// URL first took a write on the new primary.
	stop, promoted, writable time.Time
	rebuilt                  time.Duration // pg-standby, after
	procs                    []procOutage
}

// procOutage is one service process through a failover: its readiness probe's first
// failure after the stop (zero: it never failed), and its first success after its last
// failure (zero: not ready again within readyWithin).
type procOutage struct {
	slot                 string
	pidBefore, pidAfter  int
	firstFailed, readyAt time.Time
}

// readyWithin bounds how long after the promotion a process may take to answer ready again.
const readyWithin = 60 * time.Second

func (r *chaosRun) failOver(ctx context.Context) (*failoverResult, error) {
	res := &failoverResult{}
	var err error
	if res.from, err = r.primaryPort(ctx); err != nil {
		return res, err
	}
	probeCtx, stopProbes := context.WithCancel(ctx)
	promoted := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { stopProbes(); wg.Wait() }()
	watch := watchOutage(ctx, fmt.Sprintf("127.0.0.1:%d", res.from))
	began := time.Now()
	wg.Go(func() { res.writable = firstWrite(probeCtx, r.dbURL, res.from) })
	res.procs = make([]procOutage, len(r.names))
	for i, name := range r.names {
		s, o := r.slots[name], &res.procs[i]
		*o = procOutage{slot: name, pidBefore: s.pid()}
		if o.pidBefore == 0 {
			continue // scaled away or down: nothing to probe
		}
		wg.Go(func() { o.firstFailed, o.readyAt = probeReady(probeCtx, s.url()+"/readyz", promoted) })
	}
	err = r.svc.run(ctx, "pg-failover")
	res.promoted = time.Now()
	close(promoted)
	if res.stop, _ = watch(); res.stop.IsZero() {
		res.stop = began
	}
	if err != nil {
		return res, err
	}
	// The probes end once every process answered again, or readyWithin after the promotion.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(readyWithin):
		stopProbes()
		<-done
	}
	for i := range res.procs {
		res.procs[i].pidAfter = r.slots[res.procs[i].slot].pid()
	}
	if res.to, err = r.primaryPort(ctx); err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := r.svc.run(ctx, "pg-standby"); err != nil {
		return res, fmt.Errorf("rebuilding the standby: %w", err)
	}
	res.rebuilt = time.Since(t0)
	return res, nil
}

// primaryPort returns the port of the wallet's Postgres primary, asking through the run's
// pool for up to 30 s: after a failover its connections to the old primary fail once each.
func (r *chaosRun) primaryPort(ctx context.Context) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var port int
		err := r.db.QueryRow(ctx, `SELECT inet_server_port()`).Scan(&port)
		if err == nil {
			return port, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return 0, fmt.Errorf("finding the primary: %w", err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// firstWrite returns when a new connection through url (the services' URL) first took a
// write on a server other than the one at port from (the old primary), trying every 50 ms
// until ctx ends (zero then). Its write is a temporary table's: nothing the audit reads.
func firstWrite(ctx context.Context, url string, from int) time.Time {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		port := from
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			if _, err = conn.Exec(cctx, `CREATE TEMPORARY TABLE failover_probe (x int)`); err == nil {
				err = conn.QueryRow(cctx, `SELECT inet_server_port()`).Scan(&port)
			}
			_ = conn.Close(cctx) // a probe: it only had to write
		}
		cancel()
		if err == nil && port != from {
			return time.Now()
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeReady asks url (a process's /readyz) every 100 ms, and returns its first failure
// and its first success after that, once it had both, or its first success after promoted
// is closed when it never failed; zero times for what did not happen before ctx ended.
func probeReady(ctx context.Context, url string, promoted <-chan struct{}) (firstFailed, readyAt time.Time) {
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return firstFailed, time.Time{}
		}
		resp, err := c.Do(req)
		now := time.Now()
		if err == nil {
			_ = resp.Body.Close() // only its status counts
		}
		switch {
		case ctx.Err() != nil:
			return firstFailed, time.Time{}
		case err != nil || resp.StatusCode != http.StatusOK:
			if firstFailed.IsZero() {
				firstFailed = now
			}
		case !firstFailed.IsZero():
			return firstFailed, now
		default:
			select {
			case <-promoted:
				return time.Time{}, now
			default:
			}
		}
		select {
		case <-ctx.Done():
			return firstFailed, time.Time{}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reportFailover prints, under the failover's line, how long the database and each service
// process were without the primary, whether each came back in the same process, how long
// the standby's rebuild took, the epoch walletsvc began, and when balance events, the inbox
// and the SMS log took writes again.
func (r *chaosRun) reportFailover(ctx context.Context, e executed) {
	f := e.failover
	if f == nil || f.promoted.IsZero() {
		return
	}
	since := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%.2fs", t.Sub(f.stop).Seconds())
	}
	r.printf("      primary :%d stopped; :%d promoted (pg-failover returned) %s after; the services' URL took a write again %s after; standby rebuilt in %.1fs\n",
		f.from, f.to, since(f.promoted), since(f.writable), f.rebuilt.Seconds())
	for _, p := range f.procs {
		if p.pidBefore == 0 {
			r.printf("      %-12s not running (scaled away or down)\n", p.slot)
			continue
		}
		same := "the same process"
		if p.pidAfter != p.pidBefore {
			same = fmt.Sprintf("A NEW PROCESS (pid %d, was %d)", p.pidAfter, p.pidBefore)
		}
		if p.firstFailed.IsZero() {
			r.printf("      %-12s ready throughout; %s\n", p.slot, same)
			continue
		}
		r.printf("      %-12s not ready from %s to %s after the stop; %s\n", p.slot, since(p.firstFailed), since(p.readyAt), same)
	}
	var lastEvent, firstEvent, firstInbox, firstSMS *time.Time
	err := r.db.QueryRow(ctx, `SELECT max(occurred_at) FILTER (WHERE occurred_at < $1), min(occurred_at) FILTER (WHERE occurred_at >= $1)
		FROM wallet_events WHERE occurred_at BETWEEN $1::timestamptz - interval '30 seconds' AND $1::timestamptz + interval '120 seconds'`, f.stop).Scan(&lastEvent, &firstEvent)
	if err == nil {
		err = r.ndb.QueryRow(ctx, `SELECT (SELECT min(first_seen_at) FROM notify.notifications WHERE first_seen_at >= $1),
			(SELECT min(sent_at) FROM notify.sms_log WHERE sent_at >= $1)`, f.stop).Scan(&firstInbox, &firstSMS)
	}
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "none"
		}
		return fmt.Sprintf("%+.2fs", t.Sub(f.stop).Seconds())
	}
	r.printf("      balance events: the last before the stop at %s, the first after at %s; first inbox row after it %s, first SMS %s\n",
		at(lastEvent), at(firstEvent), at(firstInbox), at(firstSMS))
	rows, err := r.db.Query(ctx, `SELECT epoch, minted_at, reason FROM wallet_epochs WHERE minted_at >= $1 ORDER BY epoch`, f.stop)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	type epoch struct {
		epoch  int64
		at     time.Time
		reason string
	}
	epochs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (epoch, error) {
		var ep epoch
		return ep, row.Scan(&ep.epoch, &ep.at, &ep.reason)
	})
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	for _, ep := range epochs {
		r.printf("      walletsvc began epoch %d %s after the stop: %s\n", ep.epoch, at(&ep.at), firstLine(ep.reason))
	}
	if len(epochs) == 0 {
		r.printf("      walletsvc began NO new epoch (its check should see the new timeline)\n")
	}
}

// failoverDefects are what a failover's measures hold against the product: a process that
// did not answer ready again within readyWithin of the promotion, or answered as a new
// process.
func failoverDefects(ex []executed) []string {
	var out []string
	for _, e := range ex {
		f := e.failover
		if e.Kind != Failover || f == nil || f.promoted.IsZero() {
			continue
		}
		for _, p := range f.procs {
			switch {
			case p.pidBefore == 0:
			case p.readyAt.IsZero():
				out = append(out, fmt.Sprintf("failover at +%s: %s did not answer ready within %s of the promotion", e.At, p.slot, readyWithin))
			case p.pidAfter != p.pidBefore:
				out = append(out, fmt.Sprintf("failover at +%s: %s came back as a new process", e.At, p.slot))
			}
		}
	}
	return out
}

// judgeRewinds counts what the notifier set aside as of a rewound history of the wallet's
// database (notify.rewound) and the users it rewound (history_rewound in its audit trail).
// No fault of the run loses a commit: Postgres is restarted and failed over with every commit
// it acknowledged on disk or on its synchronous standby, so each count must be zero.
func (r *chaosRun) judgeRewinds(ctx context.Context) ([]string, error) {
	var setAside, rewound int
	if err := r.ndb.QueryRow(ctx, `SELECT (SELECT count(*) FROM notify.rewound)::int,
		(SELECT count(*) FROM notify.audit WHERE action = 'history_rewound')::int`).Scan(&setAside, &rewound); err != nil {
		return nil, err
	}
	r.printf("chaos: set aside as of a rewound history: notify.rewound=%d, history_rewound audit rows=%d\n", setAside, rewound)
	if setAside+rewound == 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("the notifier set %d rows aside as of a rewound history and rewound %d users, though no fault lost a commit", setAside, rewound)}, nil
}
