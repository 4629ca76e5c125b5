// Package audit checks, over the wallet's and the notifier's databases (one database or two),
// what the product promises users (the invariants of docs/ARCHITECTURE.md) once the pipeline is
// quiet: every saga ended, every wallet's balance is its ledger's sum and never negative,
// every outbox row was published, and each user's SMS log is their balance events in seq
// order, each once, each stating the balance after it. The e2e tests and the chaos run both
// audit through it.
package audit

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// The audit's statements, one a file in sql/.
var (
	//go:embed sql/wallet_counts.sql
	walletCountsSQL string
	//go:embed sql/stuck_sagas.sql
	stuckSagasSQL string
	//go:embed sql/ledger_sums.sql
	ledgerSumsSQL string
	//go:embed sql/balance_events.sql
	balanceEventsSQL string
	//go:embed sql/notifications.sql
	notificationsSQL string
	//go:embed sql/positions.sql
	positionsSQL string
	//go:embed sql/sms_log.sql
	smsLogSQL string
	//go:embed sql/wallet_quiet.sql
	walletQuietSQL string
	//go:embed sql/notify_unfinished.sql
	notifyUnfinishedSQL string
)

// DBs are the two services' databases: Wallet holds the wallet's schema (public), Notify the
// notifier's (notify). They may be one pool. Nothing joins across them: each side is read
// from its own database and the two are compared here.
type DBs struct {
	Wallet, Notify *pgxpool.Pool
}

// Same returns DBs of one database holding both schemas.
func Same(db *pgxpool.Pool) DBs { return DBs{Wallet: db, Notify: db} }

// Result is what an audit found. Every count but Users, Events, SMS and DeadLettered is a
// defect.
type Result struct {
	Users, Events, SMS int
	DeadLettered       int // dead-lettered SMS the run expected (see Options)
	Lost               int // events without their SMS (or dead-lettered unexpectedly)
	Duplicated         int // SMS beyond the first for one (user, seq)
	OutOfOrder         int // SMS written after an SMS of a later seq of the same user
	SagasStuck         int // sagas not completed, compensated or failed (needs_attention included)
	LedgerMismatch     int // wallets whose balance is negative or differs from sum(ledger)
	Unpublished        int // outbox rows never published
	WrongText          int // SMS whose text does not end with the event's balance after it
	Phantom            int // SMS of no event
	// Details are examples of the defects counted, at most MaxDetails of them.
	Details []string
}

// MaxDetails bounds the examples of defects a Result keeps.
const MaxDetails = 40

// Failed reports whether any invariant was broken.
func (r Result) Failed() bool {
	return r.Lost+r.Duplicated+r.OutOfOrder+r.SagasStuck+r.LedgerMismatch+r.Unpublished+r.WrongText+r.Phantom > 0
}

// Options say which dead letters a run provoked.
type Options struct {
	// ExpectDeadLetter reports whether a dead letter for user's SMS seq to phone is one the
	// run provoked (a phone configured to fail, a provider that refused that SMS for good):
	// those count as DeadLettered, any other as Lost. Nil expects every dead letter, and the
	// caller checks DeadLettered itself.
	ExpectDeadLetter func(user, seq int64, phone string) bool
}

// Check audits the databases. It does not wait: call it once Quiet says the pipeline has
// nothing left to do.
//
// An SMS counts once per (user, seq), not counting an operator's replays (marked late); it is
// in order when, per user, the SMS log's rows were written (ids) in seq order; its text ends
// with the event's balance after it and currency ("… Balance: 154.04 CNY." or
// "…，余额 154.04 CNY。").
func Check(ctx context.Context, dbs DBs, o Options) (Result, error) {
	var r Result
	noteN := func(n *int, k int, format string, args ...any) {
		*n += k
		if len(r.Details) < MaxDetails {
			r.Details = append(r.Details, fmt.Sprintf(format, args...))
		}
	}
	note := func(n *int, format string, args ...any) { noteN(n, 1, format, args...) }

	// The wallet's side.
	if err := dbs.Wallet.QueryRow(ctx, walletCountsSQL).
		Scan(&r.Users, &r.Unpublished); err != nil {
		return r, err
	}
	rows, err := dbs.Wallet.Query(ctx, stuckSagasSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var id int64
		var state, code string
		if err := row.Scan(&id, &state, &code); err != nil {
			return err
		}
		note(&r.SagasStuck, "saga %d is %s %s", id, state, code)
		return nil
	}); err != nil {
		return r, err
	}
	rows, err = dbs.Wallet.Query(ctx, ledgerSumsSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var user, balance, sum int64
		if err := row.Scan(&user, &balance, &sum); err != nil {
			return err
		}
		if balance < 0 || balance != sum {
			note(&r.LedgerMismatch, "wallet %d: balance %d, sum(ledger) %d", user, balance, sum)
		}
		return nil
	}); err != nil {
		return r, err
	}
	type event struct {
		phone   string
		balance string // "154.04 CNY"
	}
	events := map[key]event{}
	var order []key
	rows, err = dbs.Wallet.Query(ctx, balanceEventsSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var k key
		var e event
		if err := row.Scan(&k.user, &k.seq, &e.phone, &e.balance); err != nil {
			return err
		}
		events[k] = e
		order = append(order, k)
		return nil
	}); err != nil {
		return r, err
	}

	// The notifier's side: the gate's records and the SMS log, in the order it was written.
	status := map[key]string{}
	rows, err = dbs.Notify.Query(ctx, notificationsSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var k key
		var st string
		if err := row.Scan(&k.user, &k.seq, &st); err != nil {
			return err
		}
		status[k] = st
		return nil
	}); err != nil {
		return r, err
	}
	// Each user's position at the gate: a seq at or below it is finished, whether or not
	// retention has pruned its inbox row since.
	position := map[int64]int64{}
	rows, err = dbs.Notify.Query(ctx, positionsSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var user, lastSeq int64
		if err := row.Scan(&user, &lastSeq); err != nil {
			return err
		}
		position[user] = lastSeq
		return nil
	}); err != nil {
		return r, err
	}
	sms := map[key]int{}
	last := map[int64]int64{} // user -> the seq of the SMS written last
	rows, err = dbs.Notify.Query(ctx, smsLogSQL)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var k key
		var text string
		if err := row.Scan(&k.user, &k.seq, &text); err != nil {
			return err
		}
		r.SMS++
		sms[k]++
		if prev, ok := last[k.user]; ok && k.seq < prev {
			note(&r.OutOfOrder, "user %d: SMS for seq %d written after seq %d", k.user, k.seq, prev)
		}
		last[k.user] = k.seq
		e, ok := events[k]
		switch {
		case !ok:
			r.Phantom++
		case !strings.HasSuffix(text, e.balance+".") && !strings.HasSuffix(text, e.balance+"。"):
			r.WrongText++
		}
		return nil
	}); err != nil {
		return r, err
	}

	for _, k := range order {
		e, st, n := events[k], status[k], sms[k]
		r.Events++
		if st == "" && k.seq <= position[k.user] {
			// Finished at the gate, its inbox row pruned by retention: sent if its SMS is in
			// the log, else dead-lettered (or skipped), and judged as such.
			st = "dead_lettered"
			if n > 0 {
				st = "sent"
			}
		}
		switch {
		case n == 0 && st == "dead_lettered" && (o.ExpectDeadLetter == nil || o.ExpectDeadLetter(k.user, k.seq, e.phone)):
			r.DeadLettered++
		case n == 0 && st == "dead_lettered":
			note(&r.Lost, "user %d seq %d dead-lettered, but its phone %s is not one configured to fail", k.user, k.seq, e.phone)
		case n == 0:
			note(&r.Lost, "user %d seq %d: no SMS (notification %q)", k.user, k.seq, st)
		case n > 1:
			noteN(&r.Duplicated, n-1, "user %d seq %d: %d SMS", k.user, k.seq, n)
		case st != "sent":
			note(&r.Lost, "user %d seq %d: an SMS, but the gate recorded %q", k.user, k.seq, st)
		}
	}
	return r, nil
}

// key is one balance event: (user, seq).
type key struct{ user, seq int64 }

func forEach(rows pgx.Rows, f func(pgx.CollectableRow) error) error {
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) { return struct{}{}, f(row) })
	return err
}

// Quiet reports whether the pipeline has nothing left to do: no saga running, no outbox row
// unpublished, no event without a finished notification (sent or dead-lettered). It also
// says what is left.
func Quiet(ctx context.Context, dbs DBs) (bool, string, error) {
	var running, unpublished, pending int
	var users, seqs []int64
	err := dbs.Wallet.QueryRow(ctx, walletQuietSQL).
		Scan(&running, &unpublished, &users, &seqs)
	if err != nil {
		return false, "", err
	}
	// Every event of a user is finished when the user's position at the gate (never pruned,
	// unlike the inbox rows) has reached its last event: the gate finishes a user's seqs in
	// order, each once.
	var unfinished int64
	err = dbs.Notify.QueryRow(ctx, notifyUnfinishedSQL, pg.Args{"users": users, "events": seqs}).Scan(&unfinished, &pending)
	if err != nil {
		return false, "", err
	}
	left := fmt.Sprintf("sagas_running=%d unpublished=%d sms_unfinished=%d inbox_pending=%d", running, unpublished, unfinished, pending)
	return running+unpublished == 0 && unfinished == 0, left, nil
}
