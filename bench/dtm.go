package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtm-labs/client/dtmcli"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DTM is the peer measured in the same run: DTM's server running sagas of two branches, each
// an action and a compensation, which are no-op HTTP handlers of this load generator.
type DTM struct {
	Version string     `json:"version"`
	Phases  []DTMPhase `json:"phases"`
	// Work are the equal-work phases (dtm_work.go): the deposit's business work under DTM's
	// barrier; WorkCheck says what the check of their database found.
	Work      []DTMPhase `json:"work_phases,omitempty"`
	WorkCheck string     `json:"work_check,omitempty"`
	// ActionCalls and CompensateCalls are the branch calls the handlers answered over the
	// measured phases; a compensation means a saga was rolled back.
	ActionCalls     int64   `json:"action_calls"`
	CompensateCalls int64   `json:"compensate_calls"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"`
}

// DTMPhase is DTM at one client count, closed loop: each client submits a saga with
// WaitResult (DTM answers once the saga has ended) and then the next.
type DTMPhase struct {
	Clients   int     `json:"clients"`
	Seconds   float64 `json:"seconds"`
	Completed int64   `json:"completed"`
	Errors    int64   `json:"errors"`
	SagasPerS float64 `json:"sagas_per_s"`
	Latency   Latency `json:"latency"`
	// Resources from the phase's start until DTM has written the last branch states of its
	// sagas (it writes them asynchronously, in batches), as for the product's phases.
	CPU        CPUSample   `json:"cpu_s"`
	CPUSpan    float64     `json:"cpu_span_s"`
	OthersCPU  float64     `json:"others_cpu_share"`
	DBCommits  int64       `json:"db_commits"`
	Probes     int64       `json:"bench_probe_tx"` // of DBCommits: the bench's own, one transaction each
	Writes     *WriteTx    `json:"write_tx,omitempty"`
	WAL        *WALSpan    `json:"wal,omitempty"`
	Statements *Statements `json:"statements,omitempty"`
	Note       string      `json:"note,omitempty"`
	// Work: a phase of the wallet's work (not no-op branches).
	Work bool `json:"work,omitempty"`
	// Rows is what the phase's sagas wrote, from the WAL (store and business databases).
	Rows *RowWrites `json:"rows,omitempty"`
}

// label names the phase in the statement tables.
func (p DTMPhase) label() string {
	if p.Work {
		return "DTM wallet work × " + strconv.Itoa(p.Clients)
	}
	return "DTM saga × " + strconv.Itoa(p.Clients)
}

// dtmRequestTimeout bounds each call of the client to DTM, as the product's client is bounded.
const dtmRequestTimeout = 30 * time.Second

// dtm measures DTM's server on a database of its own at each -clients count.
func (b *bench) dtm(ctx context.Context) error {
	done := b.step("DTM " + dtmVersion)
	defer done()
	u, err := b.newDB(ctx, "dtm")
	if err != nil {
		return err
	}
	b.dtmDB = u
	schema, err := os.ReadFile(b.dtmBuild.schema)
	if err != nil {
		return err
	}
	db, err := newProbePool(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, string(schema)); err != nil {
		return fmt.Errorf("DTM's schema: %w", err)
	}
	if err := b.keepWAL(ctx); err != nil {
		return err
	}
	stmts, err := b.statements(ctx)
	if err != nil {
		return err
	}
	branches, err := startBranches(ctx)
	if err != nil {
		return err
	}
	defer branches.close()
	srv, err := startDTM(ctx, b.dtmBuild.bin, u, filepath.Join(b.cfg.RunDir, b.ts+"-dtm.log"))
	if err != nil {
		return err
	}
	b.meter.procs["dtm"] = srv
	defer b.stopProc("dtm")
	// The client's connections to DTM are kept alive and reused, as the product's client's
	// are: the HTTP client dtmcli uses keeps at most GOMAXPROCS+1 idle per host otherwise.
	dtmcli.GetRestyClient2(dtmRequestTimeout).SetTransport(&http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute})
	l := &dtmLoad{server: srv.URL, branches: branches.url, tag: "bench-" + b.ts, db: db, dbURL: u, stmts: stmts, meter: b.meter}
	l.submit = l.noopSaga
	// Warm up (not reported): connections, statement caches.
	l.phase(ctx, 8, 2*time.Second)
	a0, c0 := branches.actions.Load(), branches.compensations.Load()
	r := &DTM{Version: dtmVersion}
	b.res.DTM = r // a run cut short reports the phases that ran
	for _, c := range b.cfg.Clients {
		ph := l.phase(ctx, c, b.cfg.Phase)
		b.log.Info("dtm", "clients", c, "sagas/s", ph.SagasPerS, "p99_ms", ph.Latency.P99, "errors", ph.Errors)
		r.Phases = append(r.Phases, ph)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.ActionCalls, r.CompensateCalls = branches.actions.Load()-a0, branches.compensations.Load()-c0
	if err := b.dtmWork(ctx, l, branches, r); err != nil {
		return fmt.Errorf("DTM doing the wallet's work: %w", err)
	}
	r.PeakRSSMiB = peakRSSMiB(srv)
	return nil
}

// dtmLoad drives a running DTM server.
type dtmLoad struct {
	server, branches string // DTM's API; the branch handlers' base URL
	tag              string // makes the run's global transaction ids unique
	next             atomic.Int64
	db               *pgxpool.Pool // DTM's store (newProbePool), read by the bench's probes only
	dbURL            string
	stmtURL          string // the database whose statements the phase reports ("": dbURL)
	stmts            *statementMeter
	meter            *cpuMeter
	probes           atomic.Int64 // the transactions the bench ran on db
	// submit runs saga number i to its end: the no-op sagas, or the wallet's work.
	submit func(i int64) error
	// work is the business database of the equal-work phases (nil for the no-op ones): its
	// commits count with the store's, and its WAL is read with it.
	work *dtmBusiness
}

// probe runs one of the bench's statements on DTM's database, marked and counted.
func (l *dtmLoad) probe(ctx context.Context, sql string, args ...any) pgx.Row {
	l.probes.Add(1)
	return l.db.QueryRow(ctx, probe+sql, args...)
}

// noopSaga submits saga number i of two no-op branches and waits for its end.
func (l *dtmLoad) noopSaga(i int64) error {
	// The id is made here, as the product's client makes its Idempotency-Key, rather than
	// asked of DTM (dtmcli.MustGenGid), which would cost DTM a request per saga.
	s := dtmcli.NewSaga(l.server, l.tag+"-"+strconv.FormatInt(i, 10))
	body := map[string]any{"amount": 100, "saga": i}
	s.Add(l.branches+"/b1/action", l.branches+"/b1/compensate", body)
	s.Add(l.branches+"/b2/action", l.branches+"/b2/compensate", body)
	s.WaitResult = true
	s.RequestTimeout = int64(dtmRequestTimeout / time.Second)
	return s.Submit()
}

// snapshot reads the CPU of the stack, DTM's database's commit count and the WAL position,
// and the last branch row's id.
func (l *dtmLoad) snapshot(ctx context.Context) (cpu CPUSample, commits int64, lsn string, lastBranch int64) {
	_ = l.probe(ctx, `SELECT xact_commit, pg_current_wal_flush_lsn()::text,
		(SELECT COALESCE(max(id), 0) FROM trans_branch_op) FROM pg_stat_database WHERE datname = current_database()`).Scan(&commits, &lsn, &lastBranch)
	if l.work != nil {
		commits += l.work.commits(ctx)
	}
	return l.meter.sample(), commits, lsn, lastBranch
}

// phase runs the saga closed loop with clients for d.
func (l *dtmLoad) phase(ctx context.Context, clients int, d time.Duration) DTMPhase {
	ph := DTMPhase{Clients: clients}
	stmtURL := cmp.Or(l.stmtURL, l.dbURL)
	evicted, stmtErr := l.stmts.reset(ctx, stmtURL)
	probes0 := l.probes.Load()
	cpu0, commits0, lsn0, branch0 := l.snapshot(ctx)
	var (
		lat      recorder
		ok, errs atomic.Int64
		firstErr error
		errMu    sync.Mutex
		wg       sync.WaitGroup
		start    = time.Now()
		end      = start.Add(d)
	)
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				t0 := time.Now()
				err := l.submit(l.next.Add(1))
				lat.add(time.Since(t0))
				if err == nil {
					ok.Add(1)
					continue
				}
				errs.Add(1)
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	ph.Seconds, ph.Completed, ph.Errors = round2(el.Seconds()), ok.Load(), errs.Load()
	ph.SagasPerS, ph.Latency = rate(ph.Completed, el), lat.latency()
	if firstErr != nil {
		ph.Note = "first error: " + firstErr.Error() + "; "
	}
	// DTM records its branches' outcomes in batches after answering: the span ends when the
	// phase's actions are all recorded.
	var pending int64
	for settle := time.Now().Add(10 * time.Second); time.Now().Before(settle) && ctx.Err() == nil; {
		_ = l.probe(ctx, `SELECT count(*) FROM trans_branch_op WHERE id > $1 AND op = 'action' AND status <> 'succeed'`, branch0).Scan(&pending)
		if pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pending > 0 {
		ph.Note += fmt.Sprintf("%d branch outcomes still unrecorded after 10 s; ", pending)
	}
	ph.Probes = l.probes.Load() - probes0 // the closing snapshot's commit is not in its count
	cpu1, commits1, lsn1, _ := l.snapshot(ctx)
	span := time.Since(start)
	ph.CPU, ph.DBCommits, ph.CPUSpan = cpu1.since(cpu0), commits1-commits0, round2(span.Seconds())
	ph.OthersCPU = ph.CPU.others(span, runtime.NumCPU())
	ph.WAL = &WALSpan{From: lsn0, To: lsn1}
	if stmtErr == nil {
		ph.Statements, stmtErr = l.stmts.read(ctx, stmtURL, evicted)
	}
	if stmtErr != nil {
		ph.Note += "statements: " + stmtErr.Error()
	}
	return ph
}

// walInspection is the phase's span, whose answer fills Writes (or the note).
func (p *DTMPhase) walInspection(db string, business ...string) walInspection {
	return walInspection{db: db, span: p.WAL, set: func(w WriteTx, err error) {
		if err != nil {
			p.Note += " write transactions: " + err.Error()
			return
		}
		p.Writes = &w
	}, rowDBs: business, rows: func(r RowWrites, err error) {
		if err != nil {
			p.Note += " rows: " + err.Error()
			return
		}
		p.Rows = &r
	}}
}

// branchServer serves the sagas' branches: every action and compensation succeeds at once.
type branchServer struct {
	url                    string
	srv                    *http.Server
	actions, compensations atomic.Int64
	work                   atomic.Pointer[dtmBusiness] // the equal-work phases' state, while they run
}

func startBranches(ctx context.Context) (*branchServer, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &branchServer{url: "http://" + ln.Addr().String()}
	ok := func(n *atomic.Int64) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			n.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"dtm_result":"`+dtmcli.ResultSuccess+`"}`)
		}
	}
	mux := http.NewServeMux()
	for _, b := range []string{"b1", "b2"} {
		mux.Handle("POST /"+b+"/action", ok(&s.actions))
		mux.Handle("POST /"+b+"/compensate", ok(&s.compensations))
	}
	for _, b := range []string{"charge", "credit"} {
		for _, op := range []string{"action", "compensate"} {
			mux.HandleFunc("POST /"+b+"/"+op, func(w http.ResponseWriter, r *http.Request) { s.serveWork(w, r, b, op) })
		}
	}
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *branchServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
