package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtm-labs/client/dtmcli"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/walletsaga/walletsaga/migrations"
)

// The equal-work peer: DTM running the deposit's own business work, so that the product is
// compared with a framework doing what it does rather than with no-op branches. Each saga has
// two branches, as a deposit has two steps:
//   - charge: the payment source is charged; a remote call the bench answers from memory
//     (idempotent by the saga's global id), as the product's gateway stub is;
//   - credit: under DTM's branch barrier (its row in dtm_barrier.barrier, in the same
//     transaction), ONE statement raises the balance, writes the ledger row and the outbox
//     row, as the product's change statement does, on the product's own tables and indexes
//     (the wallet migrations, in a database of its own).
//
// A compensation undoes its branch (refund in memory; the credit's reversal under the
// barrier), though none runs when every branch succeeds.

// dtmDepositSQL is the product's change statement for a credit, less what only the product
// needs (the reply's predecessor read, the idempotency guard the barrier replaces): raise the
// balance and the event sequence under the wallet's row lock, write the ledger row and the
// outbox row.
const dtmDepositSQL = `
WITH w AS (
    UPDATE wallets SET balance = balance + $3, event_seq = event_seq + 1, updated_at = now()
    WHERE user_id = $1
    RETURNING balance, event_seq, currency
), l AS (
    INSERT INTO ledger_entries (user_id, saga_id, step, amount, balance_after)
    SELECT $1, $2, $4, $3, w.balance FROM w
)
INSERT INTO wallet_events (user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale)
SELECT $1, w.event_seq, $5, $3, w.currency, w.balance, $2, u.phone, u.locale FROM w JOIN users u ON u.id = $1`

// dtmBusiness is the equal-work branches' state: the business database and the charges.
type dtmBusiness struct {
	url   string
	pool  *pgxpool.Pool // the probes' (commits, the check)
	db    *sql.DB       // the branches' (DTM's barrier takes a *sql.DB)
	users []int64

	mu      sync.Mutex
	charged map[string]int64 // by global id: the amount charged and not refunded
	calls   atomic.Int64
	failed  atomic.Int64
}

// dtmWorkConns bounds the business database's connections, as walletsvc's pool is bounded
// (SAGA_WORKERS + 8 = 24 by default).
const dtmWorkConns = 24

// dtmWorkAmount is what each saga deposits.
const dtmWorkAmount = 100

// dtmWork runs the equal-work phases at each -clients count, on the DTM server and branch
// server of the no-op phases, then checks what the sagas wrote.
func (b *bench) dtmWork(ctx context.Context, l *dtmLoad, branches *branchServer, r *DTM) error {
	done := b.step("DTM doing the wallet's work")
	defer done()
	w, err := b.newDTMBusiness(ctx)
	if err != nil {
		return err
	}
	defer w.close()
	b.dtmWorkDB = w.url
	branches.work.Store(w)
	defer branches.work.Store(nil)
	work := &dtmLoad{server: l.server, branches: l.branches, tag: l.tag, db: l.db, dbURL: l.dbURL, stmtURL: w.url, stmts: l.stmts, meter: l.meter, work: w}
	work.submit = func(i int64) error {
		gid := work.tag + "-w" + strconv.FormatInt(i, 10)
		s := dtmcli.NewSaga(work.server, gid)
		body := map[string]any{"user": w.users[int(i)%len(w.users)], "amount": dtmWorkAmount, "saga": i}
		s.Add(work.branches+"/charge/action", work.branches+"/charge/compensate", body)
		s.Add(work.branches+"/credit/action", work.branches+"/credit/compensate", body)
		s.WaitResult = true
		s.RequestTimeout = int64(dtmRequestTimeout / time.Second)
		return s.Submit()
	}
	work.phase(ctx, 8, 2*time.Second) // warm-up, not reported
	for _, c := range b.cfg.Clients {
		ph := work.phase(ctx, c, b.cfg.Phase)
		ph.Work = true
		b.log.Info("dtm work", "clients", c, "sagas/s", ph.SagasPerS, "p99_ms", ph.Latency.P99, "errors", ph.Errors)
		r.Work = append(r.Work, ph)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.WorkCheck, err = w.check(ctx)
	if err != nil {
		return err
	}
	if f := w.failed.Load(); f > 0 {
		r.WorkCheck += fmt.Sprintf("; %d branch calls failed", f)
	}
	return nil
}

// newDTMBusiness makes the business database: the wallet's migrations, DTM's barrier table,
// and -users users with empty wallets.
func (b *bench) newDTMBusiness(ctx context.Context) (*dtmBusiness, error) {
	u, err := b.newDB(ctx, "dtmwork")
	if err != nil {
		return nil, err
	}
	pool, err := newProbePool(ctx, u)
	if err != nil {
		return nil, err
	}
	w := &dtmBusiness{url: u, pool: pool, charged: map[string]int64{}}
	if _, err := migrations.Wallet.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		w.close()
		return nil, fmt.Errorf("the wallet's migrations: %w", err)
	}
	barrier, err := os.ReadFile(b.dtmBuild.barrier)
	if err != nil {
		w.close()
		return nil, err
	}
	// DTM's global id is its saga: there is no sagas table to point at (the product's
	// ledger rows point at theirs, which DTM's do not need).
	if _, err := pool.Exec(ctx, string(barrier)+`;
		ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_saga_id_fkey`); err != nil {
		w.close()
		return nil, fmt.Errorf("DTM's barrier table: %w", err)
	}
	if err := pool.QueryRow(ctx, `
WITH u AS (
    INSERT INTO users (name, phone, locale)
    SELECT 'bench ' || g, '+8613' || lpad(g::text, 9, '0'), 'en' FROM generate_series(1, $1) g
    RETURNING id
), w AS (
    INSERT INTO wallets (user_id) SELECT id FROM u
)
SELECT array_agg(id ORDER BY id) FROM u`, b.cfg.Users).Scan(&w.users); err != nil {
		w.close()
		return nil, fmt.Errorf("seeding users: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		w.close()
		return nil, err
	}
	// As many connections as the branches' *sql.DB may open: pgxpool's default (4 on this
	// machine) would queue DTM's branches behind each other.
	cfg.MaxConns = dtmWorkConns
	bp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		w.close()
		return nil, err
	}
	w.db = stdlib.OpenDBFromPool(bp)
	w.db.SetMaxOpenConns(dtmWorkConns)
	w.db.SetMaxIdleConns(dtmWorkConns)
	dtmcli.SetCurrentDBType(dtmcli.DBTypePostgres)
	return w, nil
}

func (w *dtmBusiness) close() {
	if w.db != nil {
		_ = w.db.Close()
	}
	w.pool.Close()
}

// commits is the business database's commit count, read on the store's probe connection's
// terms: one statement of the bench's own pool, not counted (it runs on another database).
func (w *dtmBusiness) commits(ctx context.Context) int64 {
	var n int64
	_ = w.pool.QueryRow(ctx, probe+`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n
}

// check compares what the sagas charged with what they wrote: charges = balances = the
// ledger's sum; one outbox row per event sequence, without gaps.
func (w *dtmBusiness) check(ctx context.Context) (string, error) {
	w.mu.Lock()
	var charges int64
	for _, a := range w.charged {
		charges += a
	}
	n := int64(len(w.charged))
	w.mu.Unlock()
	var balances, ledger, events, seqs, gaps int64
	if err := w.pool.QueryRow(ctx, `SELECT
		(SELECT COALESCE(sum(balance), 0) FROM wallets), (SELECT COALESCE(sum(amount), 0) FROM ledger_entries),
		(SELECT count(*) FROM wallet_events), (SELECT COALESCE(sum(event_seq), 0) FROM wallets),
		(SELECT count(*) FROM (SELECT user_id FROM wallet_events GROUP BY user_id HAVING max(seq) <> count(*)) g)`).
		Scan(&balances, &ledger, &events, &seqs, &gaps); err != nil {
		return "", err
	}
	if charges != balances || balances != ledger || events != seqs || gaps != 0 {
		return "", fmt.Errorf("inconsistent: %d sagas charged %d; balances %d, ledger %d; %d outbox rows for %d wallet seqs, %d users with gaps",
			n, charges, balances, ledger, events, seqs, gaps)
	}
	return fmt.Sprintf("consistent: %d sagas charged %d = balances = ledger; %d outbox rows = wallet seqs, no gaps", n, charges, events), nil
}

// workBody is what each branch of an equal-work saga is sent.
type workBody struct {
	User   int64 `json:"user"`
	Amount int64 `json:"amount"`
}

// serveWork answers the equal-work branches (see the package's equal-work note above).
func (s *branchServer) serveWork(w http.ResponseWriter, r *http.Request, branch, op string) {
	biz := s.work.Load()
	if biz == nil {
		http.Error(w, "no equal-work phase is running", http.StatusServiceUnavailable)
		return
	}
	biz.calls.Add(1)
	var in workBody
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		biz.failed.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	gid := r.URL.Query().Get("gid")
	var err error
	switch branch {
	case "charge":
		// The remote party, in memory: a charge per global id, refunded by its compensation.
		biz.mu.Lock()
		if op == "action" {
			biz.charged[gid] = in.Amount
		} else {
			delete(biz.charged, gid)
		}
		biz.mu.Unlock()
	case "credit":
		var bb *dtmcli.BranchBarrier
		if bb, err = dtmcli.BarrierFromQuery(r.URL.Query()); err == nil {
			amount, kind := in.Amount, "deposit"
			if op == "compensate" {
				amount, kind = -in.Amount, "reversal"
			}
			err = bb.CallWithDB(biz.db, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(r.Context(), dtmDepositSQL, in.User, sagaNumber(gid), amount, "credit", kind)
				return err
			})
		}
	}
	if err != nil {
		biz.failed.Add(1)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"dtm_result":"`+dtmcli.ResultSuccess+`"}`)
}

// sagaNumber is the number at the end of an equal-work global id (…-w<number>), the ledger
// row's saga id.
func sagaNumber(gid string) int64 {
	for i := len(gid) - 1; i >= 0; i-- {
		if gid[i] == 'w' {
			n, _ := strconv.ParseInt(gid[i+1:], 10, 64)
			return n
		}
	}
	return 0
}
