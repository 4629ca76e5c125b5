package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgLockFault (pg-lock) holds row locks on hot rows (wallets, the notifier's progress, the
// outbox) in a session of the run's own for the fault's Down, longer than the services'
// statement timeout. Its report says what it held, which statements Postgres cut off behind
// it, how long the users whose progress rows were held waited, and everyone else.
var pgLockFault = faultAction{
	inject: func(r *chaosRun, ctx context.Context, f Fault, e *executed) {
		e.held, e.err = holdLocks(ctx, r.db, r.ndb, f.Down)
	},
	report: (*chaosRun).reportHeldLocks,
}

// reportHeldLocks prints what a pg-lock fault held, what waited behind it and what was cut
// off.
func (r *chaosRun) reportHeldLocks(ctx context.Context, e executed) {
	if !e.took() {
		return
	}
	r.printf("      held %s\n", e.held)
	// Statements that started waiting before the release are cut off until a
	// statement timeout after it.
	// The wallet's cluster logs in one file per node (the second when it has a standby):
	// whichever is the primary logged what it cut off.
	wallet := []string{filepath.Join(r.cfg.RunDir, "pg", "postgres.log")}
	if r.standby {
		wallet = append(wallet, filepath.Join(r.cfg.RunDir, "pg", "postgres-b.log"))
	}
	logs := map[string][]string{"Postgres": wallet}
	if r.nsvc != nil {
		logs = map[string][]string{"the wallet's Postgres": wallet,
			"the notifier's Postgres": {filepath.Join(r.cfg.RunDir, "notify-pg", "pg", "postgres.log")}}
	}
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		c, err := countCutOffIn(logs[name], e.start, e.end.Add(pgStatementTimeout+time.Second))
		if err != nil {
			r.printf("      reading the log of %s: %v\n", name, err)
		} else {
			r.printf("      %s: %s\n", name, c)
		}
	}
	li, err := MeasureLock(ctx, r.ndb, e.held, e.start, e.end)
	if err != nil {
		r.printf("      %v\n", err)
		return
	}
	r.printf("      users whose progress rows were held: %s\n", li.Progress)
	r.printf("      outbox rows held: their SMS sent up to %.2fs after their commit (the relay does not wait for their marks); everyone else: %s\n",
		li.OutboxLatency.Seconds(), li.Others)
}

// lockedUsers is how many users' wallet rows, and how many others' notifier progress rows,
// a PGLock fault holds.
const lockedUsers = 3

// heldLocks is what a PGLock fault held.
type heldLocks struct {
	Wallets  []int64 // users whose wallet row was locked
	Progress []int64 // users whose notify.progress row was locked
	Outbox   []int64 // outbox rows (wallet_events ids) locked while unpublished
}

func (h heldLocks) String() string {
	return fmt.Sprintf("%d wallet rows (users %v), %d notifier progress rows (users %v), %d unpublished outbox rows",
		len(h.Wallets), h.Wallets, len(h.Progress), h.Progress, len(h.Outbox))
}

// holdLocks takes row locks on hot rows in a transaction of a session of the run's own in
// each database (one, when the services share it), and holds them for d, idle in the
// transaction, then rolls back (it writes nothing): the wallet rows of the lockedUsers users
// with the latest balance changes (their sagas' steps wait behind it), the notifier progress
// rows of lockedUsers others, leased by a lane first (their lanes' records and claims wait or
// skip them), and the first unpublished outbox rows it can catch (the relay's marking waits
// behind them). The services' statements that wait longer than their statement timeout are
// cut off; the sessions themselves turn every timeout off, so only the run ends them. It
// takes nothing it would wait for (SKIP LOCKED).
func holdLocks(ctx context.Context, wallet, notify *pgxpool.Pool, d time.Duration) (heldLocks, error) {
	var h heldLocks
	wtx, release, err := idleTx(ctx, wallet)
	if err != nil {
		return h, err
	}
	defer release()
	ntx := wtx
	if notify != wallet {
		var releaseN func()
		if ntx, releaseN, err = idleTx(ctx, notify); err != nil {
			return h, err
		}
		defer releaseN()
	}
	ids := func(tx pgx.Tx, sql string, args ...any) ([]int64, error) {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if h.Wallets, err = ids(wtx, `SELECT user_id FROM wallets WHERE user_id IN (
			SELECT user_id FROM wallet_events ORDER BY id DESC LIMIT 50)
		ORDER BY event_seq DESC LIMIT $1 FOR UPDATE SKIP LOCKED`, lockedUsers); err != nil {
		return h, fmt.Errorf("locking wallet rows: %w", err)
	}
	if h.Progress, err = ids(ntx, `SELECT user_id FROM notify.progress WHERE user_id <> ALL($1)
		ORDER BY lane_until DESC NULLS LAST LIMIT $2 FOR UPDATE SKIP LOCKED`, h.Wallets, lockedUsers); err != nil {
		return h, fmt.Errorf("locking progress rows: %w", err)
	}
	// An unpublished outbox row lives for milliseconds (the relay sends it at once): look
	// for one until some are caught, for a few seconds at most.
	for catch := time.Now().Add(3 * time.Second); len(h.Outbox) == 0 && time.Now().Before(catch); {
		if h.Outbox, err = ids(wtx, `SELECT id FROM wallet_events WHERE published_at IS NULL ORDER BY id LIMIT 3 FOR UPDATE SKIP LOCKED`); err != nil {
			return h, fmt.Errorf("locking outbox rows: %w", err)
		}
		if len(h.Outbox) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	select {
	case <-ctx.Done():
		return h, ctx.Err()
	case <-time.After(d):
	}
	return h, nil
}

// idleTx begins a transaction on a connection of db with every timeout off; release rolls
// it back and returns the connection.
func idleTx(ctx context.Context, db *pgxpool.Pool) (pgx.Tx, func(), error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return nil, nil, err
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		conn.Release()
	}
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL lock_timeout = 0`); err != nil {
		release()
		return nil, nil, err
	}
	return tx, release, nil
}

// cutOff counts what Postgres logged from start to end as cut off: statements cancelled by
// statement_timeout, and by their client (its own deadline passed first), and, of both, how
// many were waiting on a row of each table; and sessions ended by
// idle_in_transaction_session_timeout.
type cutOff struct {
	TimedOut, ClientCancelled int
	WaitingOn                 map[string]int
	IdleSessions              int
}

func (c cutOff) String() string {
	tables := slices.Sorted(maps.Keys(c.WaitingOn))
	var on []string
	for _, t := range tables {
		on = append(on, fmt.Sprintf("%s %d", t, c.WaitingOn[t]))
	}
	return fmt.Sprintf("statements cut off by statement_timeout %d, by their client's deadline %d (waiting on a row of: %s); sessions ended idle in a transaction %d",
		c.TimedOut, c.ClientCancelled, strings.Join(on, ", "), c.IdleSessions)
}

// pgLogTime is the time format of the lines of the run's Postgres log (its default
// log_line_prefix, "%m [%p] ").
const pgLogTime = "2006-01-02 15:04:05.000 MST"

// waitedOn matches the context Postgres logs for a statement cancelled while it waited for a
// row lock: "while updating tuple (103,71) in relation "wallet_events"".
var waitedOn = regexp.MustCompile(`CONTEXT:\s+while \w+ tuple \(\d+,\d+\) in relation "([^"]+)"`)

// countCutOffIn adds up what the Postgres logs at paths say was cut off from start to end.
func countCutOffIn(paths []string, start, end time.Time) (cutOff, error) {
	sum := cutOff{WaitingOn: map[string]int{}}
	for _, p := range paths {
		c, err := countCutOff(p, start, end)
		if err != nil {
			return sum, err
		}
		sum.TimedOut, sum.ClientCancelled, sum.IdleSessions = sum.TimedOut+c.TimedOut, sum.ClientCancelled+c.ClientCancelled, sum.IdleSessions+c.IdleSessions
		for t, n := range c.WaitingOn {
			sum.WaitingOn[t] += n
		}
	}
	return sum, nil
}

// countCutOff reads the Postgres log at path for what was cut off from start to end.
func countCutOff(path string, start, end time.Time) (cutOff, error) {
	c := cutOff{WaitingOn: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close() //nolint:errcheck // read only
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	cancelled := false // the last entry was a cancellation in the window: its context follows
	for sc.Scan() {
		line := sc.Text()
		if len(line) < len(pgLogTime) {
			continue
		}
		at, err := time.Parse(pgLogTime, line[:len(pgLogTime)])
		if err != nil {
			continue // a statement's next line
		}
		inWindow := !at.Before(start) && !at.After(end)
		if m := waitedOn.FindStringSubmatch(line); cancelled && m != nil {
			c.WaitingOn[m[1]]++
		}
		cancelled = false
		switch {
		case !inWindow:
		case strings.Contains(line, "canceling statement due to statement timeout"):
			c.TimedOut++
			cancelled = true
		case strings.Contains(line, "canceling statement due to user request"):
			c.ClientCancelled++
			cancelled = true
		case strings.Contains(line, "idle-in-transaction timeout"):
			c.IdleSessions++
		}
	}
	return c, errors.Join(sc.Err(), f.Close())
}
