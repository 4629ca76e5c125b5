// Package audit checks, over a whole database that walletsvc and the notifier shared, what
// the product promises users (the invariants of docs/ARCHITECTURE.md) once the pipeline is
// quiet: every saga ended, every wallet's balance is its ledger's sum and never negative,
// every outbox row was published, and each user's SMS log is their balance events in seq
// order, each once, each stating the balance after it. The e2e tests and the chaos run both
// audit through it.
package audit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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

// Check audits the database of db. It does not wait: call it once Quiet says the pipeline
// has nothing left to do.
//
// An SMS counts once per (user, seq), not counting an operator's replays (marked late); it is
// in order when, per user, the SMS log's rows were written (ids) in seq order; its text ends
// with the event's balance after it and currency ("… Balance: 154.04 CNY." or
// "…，余额 154.04 CNY。").
func Check(ctx context.Context, db *pgxpool.Pool, o Options) (Result, error) {
	var r Result
	noteN := func(n *int, k int, format string, args ...any) {
		*n += k
		if len(r.Details) < MaxDetails {
			r.Details = append(r.Details, fmt.Sprintf(format, args...))
		}
	}
	note := func(n *int, format string, args ...any) { noteN(n, 1, format, args...) }
	for _, q := range []struct {
		dst *int
		sql string
	}{
		{&r.Users, `SELECT count(*) FROM users`},
		{&r.SMS, `SELECT count(*) FROM notify.sms_log WHERE NOT late`},
		{&r.Unpublished, `SELECT count(*) FROM wallet_events WHERE published_at IS NULL`},
		{&r.Phantom, `SELECT count(*) FROM notify.sms_log l WHERE NOT EXISTS (SELECT 1 FROM wallet_events e WHERE e.user_id = l.user_id AND e.seq = l.seq)`},
		{&r.WrongText, `SELECT count(*) FROM notify.sms_log l JOIN wallet_events e ON e.user_id = l.user_id AND e.seq = l.seq
			CROSS JOIN LATERAL (SELECT to_char(e.balance_after / 100.0, 'FM9999999999999999990.00') || ' ' || e.currency AS s) b
			WHERE NOT l.late AND right(l.text, length(b.s) + 1) NOT IN (b.s || '.', b.s || '。')`},
	} {
		if err := db.QueryRow(ctx, q.sql).Scan(q.dst); err != nil {
			return r, err
		}
	}

	rows, err := db.Query(ctx, `SELECT id, state, COALESCE(error_code, '') FROM sagas
		WHERE state NOT IN ('completed', 'compensated', 'failed') ORDER BY id`)
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

	rows, err = db.Query(ctx, `SELECT w.user_id, w.balance, COALESCE((SELECT sum(amount) FROM ledger_entries l WHERE l.user_id = w.user_id), 0)
		FROM wallets w ORDER BY w.user_id`)
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

	rows, err = db.Query(ctx, `SELECT e.user_id, e.seq, e.phone, COALESCE(n.status, ''),
		(SELECT count(*) FROM notify.sms_log l WHERE l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late)
		FROM wallet_events e LEFT JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq
		ORDER BY e.user_id, e.seq`)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var user, seq int64
		var phone, status string
		var sms int
		if err := row.Scan(&user, &seq, &phone, &status, &sms); err != nil {
			return err
		}
		r.Events++
		switch {
		case sms == 0 && status == "dead_lettered" && (o.ExpectDeadLetter == nil || o.ExpectDeadLetter(user, seq, phone)):
			r.DeadLettered++
		case sms == 0 && status == "dead_lettered":
			note(&r.Lost, "user %d seq %d dead-lettered, but its phone %s is not one configured to fail", user, seq, phone)
		case sms == 0:
			note(&r.Lost, "user %d seq %d: no SMS (notification %q)", user, seq, status)
		case sms > 1:
			noteN(&r.Duplicated, sms-1, "user %d seq %d: %d SMS", user, seq, sms)
		case status != "sent":
			note(&r.Lost, "user %d seq %d: an SMS, but the gate recorded %q", user, seq, status)
		}
		return nil
	}); err != nil {
		return r, err
	}

	// Order: per user, in the order the SMS were written (id), seq only increases.
	rows, err = db.Query(ctx, `SELECT user_id, seq, prev FROM (
		SELECT user_id, seq, lag(seq) OVER (PARTITION BY user_id ORDER BY id) AS prev FROM notify.sms_log WHERE NOT late) s
		WHERE seq < prev ORDER BY user_id`)
	if err != nil {
		return r, err
	}
	if err := forEach(rows, func(row pgx.CollectableRow) error {
		var user, seq, prev int64
		if err := row.Scan(&user, &seq, &prev); err != nil {
			return err
		}
		note(&r.OutOfOrder, "user %d: SMS for seq %d written after seq %d", user, seq, prev)
		return nil
	}); err != nil {
		return r, err
	}
	return r, nil
}

func forEach(rows pgx.Rows, f func(pgx.CollectableRow) error) error {
	_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) { return struct{}{}, f(row) })
	return err
}

// Quiet reports whether the pipeline has nothing left to do: no saga running, no outbox row
// unpublished, no event without a finished notification (sent or dead-lettered). It also
// says what is left.
func Quiet(ctx context.Context, db *pgxpool.Pool) (bool, string, error) {
	var running, unpublished, unfinished, pending int
	err := db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM sagas WHERE state IN ('running', 'compensating')),
		(SELECT count(*) FROM wallet_events WHERE published_at IS NULL),
		(SELECT count(*) FROM wallet_events e WHERE NOT EXISTS (SELECT 1 FROM notify.notifications n
			WHERE n.user_id = e.user_id AND n.seq = e.seq AND n.status IN ('sent', 'dead_lettered'))),
		(SELECT count(*) FROM notify.notifications WHERE status = 'pending')`).Scan(&running, &unpublished, &unfinished, &pending)
	if err != nil {
		return false, "", err
	}
	left := fmt.Sprintf("sagas_running=%d unpublished=%d sms_unfinished=%d inbox_pending=%d", running, unpublished, unfinished, pending)
	return running+unpublished+unfinished == 0, left, nil
}
