package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
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
	// EventsPerS: the phase's events ÷ its length (a transfer writes two), beside SMSPerS.
	EventsPerS float64 `json:"events_per_s"`
	// Resources between the phase's start and the end of its SMS drain.
	CPU       CPUSample `json:"cpu_s"`
	CPUSpan   float64   `json:"cpu_span_s"`
	OthersCPU float64   `json:"others_cpu_share"` // of the machine, by processes outside the stack
	// DBCommits counts every transaction of the product's database over the span, the
	// bench's own probes included; Probes counts those (one transaction each).
	DBCommits int64 `json:"db_commits"`
	Probes    int64 `json:"bench_probe_tx"`
	// Writes are the write transactions (those that got a transaction id and committed) of
	// the product's database over the same span, WAL, read from the WAL after the run's last
	// measured part and split by the tables each touched; the read-only transactions are
	// DBCommits − Probes − all of them (readTx).
	Writes *WriteTx `json:"write_tx,omitempty"`
	// Rows is what the span wrote, table by table, from the same WAL.
	Rows *RowWrites `json:"rows,omitempty"`
	WAL  *WALSpan   `json:"wal,omitempty"`
	// Statements is what the product's database executed over the same span, statement by
	// statement (pg_stat_statements).
	Statements *Statements `json:"statements,omitempty"`
	Note       string      `json:"note,omitempty"`
	// Setting names the run's special conditions ("sim latency 20ms", "durable"); "" for
	// the default.
	Setting string `json:"setting,omitempty"`
	// dbURL is the database the phase ran on, whose WAL span inspectWAL reads.
	dbURL string
}

// productRun drives the running walletsvc and measures what reaches the SMS log.
type productRun struct {
	tag   string            // makes the run's Idempotency-Keys unique
	wenv  map[string]string // walletsvc's environment
	api   apiClient
	db    *pgxpool.Pool // the product's database (newProbePool), read by the bench's probes only
	dbURL string
	stmts *statementMeter
	users []int64
	meter *cpuMeter
	next  atomic.Int64
	drain time.Duration
	// probes counts the transactions the bench ran on db.
	probes atomic.Int64
}

// probeEvery is the first wait between two drain polls; each wait doubles, up to
// probeEveryMax: a drained stack is seen quickly, and a long drain costs a poll a second.
const (
	probeEvery    = 100 * time.Millisecond
	probeEveryMax = time.Second
)

// newProbePool opens the pool the bench's probes use on a product database, so that every
// probe is exactly one transaction of the database and nothing else is: one connection, on
// the simple protocol (a prepared statement's Parse would commit a transaction of its own),
// never pinged (a ping is an empty statement, a transaction too).
func newProbePool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgxpool.NewWithConfig(ctx, cfg)
}

// probe runs one of the bench's statements on the product's database, marked (statements.go)
// and counted.
func (pr *productRun) probe(ctx context.Context, sql string, args ...any) pgx.Row {
	pr.probes.Add(1)
	return pr.db.QueryRow(ctx, probe+sql, args...)
}

// firstUnsent returns the lowest id above after, and up to upTo, of an event without its
// SMS, or 0 when there is none. It walks the primary key from the cursor and stops at the
// first such event, so a poll reads only what arrived since the last one.
func (pr *productRun) firstUnsent(ctx context.Context, after, upTo int64) (int64, error) {
	var id int64
	err := pr.probe(ctx, `SELECT e.id FROM wallet_events e WHERE e.id > $1 AND e.id <= $2
		AND NOT EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)
		ORDER BY e.id LIMIT 1`, after, upTo).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// drained waits, up to deadline, until every event with an id in (after, upTo] has its SMS.
// It returns its cursor (every event in (after, cursor] has its SMS) and whether it reached
// upTo.
func (pr *productRun) drained(ctx context.Context, after, upTo int64, deadline time.Time) (int64, bool) {
	wait := probeEvery
	for ctx.Err() == nil {
		id, err := pr.firstUnsent(ctx, after, upTo)
		if err == nil && id == 0 {
			return upTo, true
		}
		if err == nil {
			after = id - 1
		}
		if time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
		wait = min(2*wait, probeEveryMax)
	}
	return after, false
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

// snapshot is what a phase reads at its start and at its end: the CPU of the stack, the
// database's commit count, the WAL position (flushed: the WAL reader reads no further) and
// the outbox's last id.
type snapshot struct {
	cpu     CPUSample
	commits int64
	lsn     string
	lastID  int64
}

// snapshot reads one, in one probe.
func (pr *productRun) snapshot(ctx context.Context) snapshot {
	var s snapshot
	_ = pr.probe(ctx, `SELECT xact_commit, pg_current_wal_flush_lsn()::text, (SELECT COALESCE(max(id), 0) FROM wallet_events)
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits, &s.lsn, &s.lastID)
	s.cpu = pr.meter.sample()
	return s
}

// lastEventID is the outbox's highest id: ids grow, so a phase's events are those between
// its first and its last.
func (pr *productRun) lastEventID(ctx context.Context) int64 {
	var id int64
	_ = pr.probe(ctx, `SELECT COALESCE(max(id), 0) FROM wallet_events`).Scan(&id)
	return id
}

// quiet waits, up to limit, until every event of the database has its SMS: a phase measured
// right after another would otherwise share the machine with the previous one's backlog.
// It reports how many were still undelivered.
func (pr *productRun) quiet(ctx context.Context, limit time.Duration) int64 {
	last := pr.lastEventID(ctx)
	cursor, ok := pr.drained(ctx, 0, last, time.Now().Add(limit))
	if ok {
		return 0
	}
	var left int64
	_ = pr.probe(ctx, `SELECT count(*) FROM wallet_events e WHERE e.id > $1 AND e.id <= $2
		AND NOT EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)`, cursor, last).Scan(&left)
	return left
}

// phase runs kind for d: closed loop with clients, or open loop at openRate sagas/s.
func (pr *productRun) phase(ctx context.Context, kind string, clients int, openRate float64, d time.Duration) Phase {
	ph := Phase{Kind: kind, Clients: clients, OpenRate: round2(openRate), Seconds: d.Seconds(), dbURL: pr.dbURL}
	evicted, stmtErr := pr.stmts.reset(ctx, pr.dbURL)
	probes0 := pr.probes.Load()
	s0 := pr.snapshot(ctx)
	var (
		lat                               recorder
		completed, failed, timeouts, errs atomic.Int64
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
			errs.Add(1)
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
	ph.Completed, ph.Failed, ph.Timeouts, ph.Errors = completed.Load(), failed.Load(), timeouts.Load(), errs.Load()
	ph.SagasPerS = rate(ph.Completed, el)
	ph.API = lat.latency()
	if firstErr != nil {
		ph.Note = "first error: " + firstErr.Error() + "; "
	}
	winEnd := time.Now()

	// Let the relay and the notifier catch up, then read the latencies of the window's
	// events: those with an id above the outbox's last at the start, up to its last now.
	lastID := pr.lastEventID(ctx)
	pr.drained(ctx, s0.lastID, lastID, time.Now().Add(pr.drain))
	var e2e, pub, deliver [4]*float64
	var sms int64
	err := pr.probe(ctx, `
		WITH x AS (
			SELECT extract(epoch FROM l.sent_at - e.occurred_at) * 1000 AS e2e,
			       extract(epoch FROM e.published_at - e.occurred_at) * 1000 AS pub,
			       extract(epoch FROM l.sent_at - e.published_at) * 1000 AS dlv
			FROM wallet_events e LEFT JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
			WHERE e.id > $1 AND e.id <= $2)
		SELECT count(*), count(*) FILTER (WHERE e2e IS NULL),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY e2e), percentile_disc(0.95) WITHIN GROUP (ORDER BY e2e),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY e2e), max(e2e),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY pub), percentile_disc(0.95) WITHIN GROUP (ORDER BY pub),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY pub), max(pub),
		  percentile_disc(0.5) WITHIN GROUP (ORDER BY dlv), percentile_disc(0.95) WITHIN GROUP (ORDER BY dlv),
		  percentile_disc(0.99) WITHIN GROUP (ORDER BY dlv), max(dlv),
		  (SELECT count(*) FROM notify.sms_log WHERE sent_at >= $3 AND sent_at < $4 AND NOT late)
		FROM x`, s0.lastID, lastID, start, winEnd).Scan(&ph.Events, &ph.Undelivered,
		&e2e[0], &e2e[1], &e2e[2], &e2e[3], &pub[0], &pub[1], &pub[2], &pub[3], &deliver[0], &deliver[1], &deliver[2], &deliver[3], &sms)
	if err != nil {
		ph.Note += " latency query: " + err.Error()
	}
	if ph.Undelivered > 0 {
		ph.Note += fmt.Sprintf("%d events without SMS after %s", ph.Undelivered, pr.drain)
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
	ph.EventsPerS = rate(ph.Events, winEnd.Sub(start))
	// The closing snapshot's own commit comes after the count it reads: it is not one of
	// the span's probes.
	ph.Probes = pr.probes.Load() - probes0
	s1 := pr.snapshot(ctx)
	span := time.Since(start)
	ph.CPU, ph.DBCommits, ph.CPUSpan = s1.cpu.since(s0.cpu), s1.commits-s0.commits, round2(span.Seconds())
	ph.OthersCPU = ph.CPU.others(span, runtime.NumCPU())
	ph.WAL = &WALSpan{From: s0.lsn, To: s1.lsn}
	if stmtErr == nil {
		ph.Statements, stmtErr = pr.stmts.read(ctx, pr.dbURL, evicted)
	}
	if stmtErr != nil {
		ph.Note += " statements: " + stmtErr.Error()
	}
	return ph
}
