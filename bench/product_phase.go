package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Phase is one load phase against the running product.
type Phase struct {
	Kind      string  `json:"kind"`    // deposit | purchase | transfer
	Clients   int     `json:"clients"` // closed loop: concurrent clients, each waiting for its saga
	OpenRate  float64 `json:"open_rate_per_s,omitempty"`
	Seconds   float64 `json:"seconds"`
	Completed int64   `json:"completed"`
	// Failed: terminal but not completed (e.g. insufficient funds); Timeouts: 202 after the
	// API's wait limit; Errors: transport errors and other statuses.
	Failed    int64   `json:"failed"`
	Timeouts  int64   `json:"timeouts"`
	Errors    int64   `json:"errors"`
	SagasPerS float64 `json:"sagas_per_s"`
	API       Latency `json:"api_latency"`
	// Events written in the phase window, and their SMS latencies from the outbox row's
	// occurred_at (its transaction's now()) to the SMS log row's sent_at; split at the
	// relay's published_at.
	Events       int64   `json:"events"`
	Undelivered  int64   `json:"undelivered_after_wait"`
	E2E          Latency `json:"commit_to_sms"`
	ToPublished  Latency `json:"commit_to_published"`
	PublishToSMS Latency `json:"published_to_sms"`
	SMSPerS      float64 `json:"sms_per_s"`
	// Resources between the phase's start and the end of its SMS drain.
	CPU       CPUSample `json:"cpu_s"`
	CPUSpan   float64   `json:"cpu_span_s"`
	OthersCPU float64   `json:"others_cpu_share"` // of the machine, by processes outside the stack
	DBCommits int64     `json:"db_commits"`
	// Writes are the write transactions (those that got a transaction id and committed) of
	// the product's database over the same span, WAL, read from the WAL after the run's last
	// measured part and split by the tables each touched; Reads = DBCommits − all of them
	// (read-only transactions of anyone).
	Writes *WriteTx `json:"write_tx,omitempty"`
	WAL    *WALSpan `json:"wal,omitempty"`
	// Statements is what the product's database executed over the same span, statement by
	// statement (pg_stat_statements).
	Statements *Statements `json:"statements,omitempty"`
	Note       string      `json:"note,omitempty"`
	// Setting names the run's special conditions ("sim latency 20ms", "durable"); "" for
	// the default.
	Setting string `json:"setting,omitempty"`
}

// productRun drives the running walletsvc and measures what reaches the SMS log.
type productRun struct {
	tag   string            // makes the run's Idempotency-Keys unique
	wenv  map[string]string // walletsvc's environment
	api   apiClient
	db    *pgxpool.Pool // the product's database
	dbURL string
	stmts *statementMeter
	users []int64
	meter *cpuMeter
	next  atomic.Int64
	drain time.Duration
}

// request sends operation number i of kind with ?wait=true and classifies the answer.
func (pr *productRun) request(ctx context.Context, kind string, i int64) (ok bool, class string, err error) {
	n := int64(len(pr.users))
	u := pr.users[i%n]
	var (
		path string
		body any
	)
	switch kind {
	case "deposit":
		path, body = "/v1/users/"+strconv.FormatInt(u, 10)+"/deposits?wait=true", map[string]any{"amount": 10000}
	case "purchase":
		path, body = "/v1/users/"+strconv.FormatInt(u, 10)+"/purchases?wait=true",
			map[string]any{"amount": 100, "merchant": "bench-shop", "reference": "bench-" + strconv.FormatInt(i, 10)}
	case "transfer":
		path, body = "/v1/transfers?wait=true", map[string]any{"from": u, "to": pr.users[(i+n/2)%n], "amount": 100}
	}
	var out opAnswer
	// Every operation carries an Idempotency-Key, as a careful client's does: the key's
	// claim is part of the saga's first commit.
	code, err := pr.api.post(ctx, path, pr.tag+"-"+kind+"-"+strconv.FormatInt(i, 10), body, &out)
	switch {
	case err != nil:
		return false, "error", err
	case code == http.StatusAccepted:
		return false, "timeout", nil
	case out.State == "completed":
		return true, "", nil
	default:
		return false, "failed", fmt.Errorf("saga %d ended %s", out.ID, out.State)
	}
}

// snapshot reads the CPU of the stack, the database's commit count and the WAL position
// (flushed: the WAL reader reads no further).
func (pr *productRun) snapshot(ctx context.Context) (CPUSample, int64, string) {
	var commits int64
	var lsn string
	_ = pr.db.QueryRow(ctx, probe+`SELECT xact_commit, pg_current_wal_flush_lsn()::text FROM pg_stat_database WHERE datname = current_database()`).Scan(&commits, &lsn)
	return pr.meter.sample(), commits, lsn
}

// quiet waits, up to limit, until every event of the database has its SMS: a phase measured
// right after another would otherwise share the machine with the previous one's backlog.
// It reports how many were still undelivered.
func (pr *productRun) quiet(ctx context.Context, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	var left int64
	for ctx.Err() == nil {
		_ = pr.db.QueryRow(ctx, probe+`SELECT count(*) FROM wallet_events e
			WHERE NOT EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)`).Scan(&left)
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(time.Second)
	}
	return left
}

// phase runs kind for d: closed loop with clients, or open loop at openRate sagas/s.
func (pr *productRun) phase(ctx context.Context, kind string, clients int, openRate float64, d time.Duration) Phase {
	ph := Phase{Kind: kind, Clients: clients, OpenRate: round2(openRate), Seconds: d.Seconds()}
	evicted, stmtErr := pr.stmts.reset(ctx, pr.dbURL)
	cpu0, commits0, lsn0 := pr.snapshot(ctx)
	var (
		lat                                 recorder
		completed, failed, timeouts, errors atomic.Int64
	)
	var firstErr error
	var errMu sync.Mutex
	one := func(t0 time.Time) {
		ok, class, err := pr.request(ctx, kind, pr.next.Add(1))
		lat.add(time.Since(t0))
		if err != nil {
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
		}
		switch {
		case ok:
			completed.Add(1)
		case class == "failed":
			failed.Add(1)
		case class == "timeout":
			timeouts.Add(1)
		default:
			errors.Add(1)
		}
	}
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	if openRate > 0 {
		// Open loop: a request every 1/openRate, whatever the answers; latency counts from
		// the scheduled start (no coordinated omission). At most 1024 in flight.
		sem := make(chan struct{}, 1024)
		interval := time.Duration(float64(time.Second) / openRate)
		for at := start; at.Before(end) && ctx.Err() == nil; at = at.Add(interval) {
			time.Sleep(time.Until(at))
			sem <- struct{}{}
			wg.Go(func() { defer func() { <-sem }(); one(at) })
		}
		ph.Clients = 0
	} else {
		for range clients {
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(end) {
					one(time.Now())
				}
			})
		}
	}
	wg.Wait()
	el := time.Since(start)
	ph.Seconds = round2(el.Seconds())
	ph.Completed, ph.Failed, ph.Timeouts, ph.Errors = completed.Load(), failed.Load(), timeouts.Load(), errors.Load()
	ph.SagasPerS = rate(ph.Completed, el)
	ph.API = lat.latency()
	if firstErr != nil {
		ph.Note = "first error: " + firstErr.Error() + "; "
	}
	winEnd := time.Now()

	// Let the relay and the notifier catch up, then read the latencies of the window's events.
	deadline := time.Now().Add(pr.drain)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		_ = pr.db.QueryRow(ctx, probe+`SELECT count(*) FROM wallet_events e WHERE e.occurred_at >= $1 AND e.occurred_at < $2
			AND NOT EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)`,
			start, winEnd).Scan(&ph.Undelivered)
		if ph.Undelivered == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ph.Undelivered > 0 {
		ph.Note += fmt.Sprintf("%d events without SMS after %s", ph.Undelivered, pr.drain)
	}
	var e2e, pub, deliver [4]*float64
	var sms int64
	err := pr.db.QueryRow(ctx, probe+`
		WITH x AS (
			SELECT extract(epoch FROM l.sent_at - e.occurred_at) * 1000 AS e2e,
			       extract(epoch FROM e.published_at - e.occurred_at) * 1000 AS pub,
			       extract(epoch FROM l.sent_at - e.published_at) * 1000 AS dlv
			FROM wallet_events e LEFT JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
			WHERE e.occurred_at >= $1 AND e.occurred_at < $2)
		SELECT count(*),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY e2e), percentile_disc(0.95) WITHIN GROUP (ORDER BY e2e),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY e2e), max(e2e),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY pub), percentile_disc(0.95) WITHIN GROUP (ORDER BY pub),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY pub), max(pub),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY dlv), percentile_disc(0.95) WITHIN GROUP (ORDER BY dlv),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY dlv), max(dlv),
		  (SELECT count(*) FROM notify.sms_log WHERE sent_at >= $1 AND sent_at < $2 AND NOT late)
		FROM x`, start, winEnd).Scan(&ph.Events,
		&e2e[0], &e2e[1], &e2e[2], &e2e[3], &pub[0], &pub[1], &pub[2], &pub[3], &deliver[0], &deliver[1], &deliver[2], &deliver[3], &sms)
	if err != nil {
		ph.Note += " latency query: " + err.Error()
	}
	toLat := func(v [4]*float64, n int64) Latency {
		f := func(p *float64) float64 {
			if p == nil {
				return 0
			}
			return round2(*p)
		}
		return Latency{N: int(n), P50: f(v[0]), P95: f(v[1]), P99: f(v[2]), Max: f(v[3])}
	}
	ph.E2E = toLat(e2e, ph.Events-ph.Undelivered)
	ph.ToPublished = toLat(pub, ph.Events)
	ph.PublishToSMS = toLat(deliver, ph.Events-ph.Undelivered)
	ph.SMSPerS = rate(sms, winEnd.Sub(start))
	cpu1, commits1, lsn1 := pr.snapshot(ctx)
	span := time.Since(start)
	ph.CPU, ph.DBCommits, ph.CPUSpan = cpu1.since(cpu0), commits1-commits0, round2(span.Seconds())
	ph.OthersCPU = ph.CPU.others(span, runtime.NumCPU())
	ph.WAL = &WALSpan{From: lsn0, To: lsn1}
	if stmtErr == nil {
		ph.Statements, stmtErr = pr.stmts.read(ctx, pr.dbURL, evicted)
	}
	if stmtErr != nil {
		ph.Note += " statements: " + stmtErr.Error()
	}
	return ph
}
