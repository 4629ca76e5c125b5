package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Result is what the run found once the stack was quiet. Every count but Events, SMS, Users and
// DeadLettered must be zero.
type Result struct {
	Users, Events, SMS int
	DeadLettered       int // dead-lettered SMS of phones configured to fail: allowed
	Lost               int // events without their SMS (or dead-lettered for a phone that works)
	Duplicated         int // SMS beyond the first for one (user, seq)
	OutOfOrder         int // SMS written after an SMS of a later seq of the same user
	SagasStuck         int // sagas not completed, compensated or failed
	LedgerMismatch     int // wallets whose balance is negative or differs from sum(ledger)
	Unpublished        int // outbox rows never published
	WrongText          int // SMS whose text does not state the event's balance after it
	Phantom            int // SMS of no event
	Details            []string
}

// Failed reports whether any invariant was broken.
func (r Result) Failed() bool {
	return r.Lost+r.Duplicated+r.OutOfOrder+r.SagasStuck+r.LedgerMismatch+r.Unpublished+r.WrongText+r.Phantom > 0
}

// Line is the run's verdict line.
func (r Result) Line(seed int64) string {
	return fmt.Sprintf("chaos: seed=%d users=%d events=%d sms=%d lost=%d duplicated=%d out_of_order=%d sagas_stuck=%d ledger_mismatch=%d",
		seed, r.Users, r.Events, r.SMS, r.Lost, r.Duplicated, r.OutOfOrder, r.SagasStuck, r.LedgerMismatch)
}

// maxDetails bounds the examples of defects the result keeps.
const maxDetails = 40

// Audit checks, over the whole database, what docs/ARCHITECTURE.md promises:
//   - every saga terminal (completed, compensated, failed; needs_attention is not: a person
//     would have to look);
//   - every wallet's balance = sum(ledger) ≥ 0;
//   - every outbox row published;
//   - for every user, the SMS log equals the outbox events in seq order: each event has exactly
//     one SMS (not counting operator replays, which are marked late), written in seq order,
//     stating the balance after the event, except events recorded dead_lettered, which are
//     allowed only for phones matching failPhone.
func Audit(ctx context.Context, db *pgxpool.Pool, failPhone *regexp.Regexp) (Result, error) {
	var r Result
	noteN := func(n *int, k int, format string, args ...any) {
		*n += k
		if len(r.Details) < maxDetails {
			r.Details = append(r.Details, fmt.Sprintf(format, args...))
		}
	}
	note := func(n *int, format string, args ...any) { noteN(n, 1, format, args...) }
	scalar := func(dst *int, sql string) error { return db.QueryRow(ctx, sql).Scan(dst) }
	for _, q := range []struct {
		dst *int
		sql string
	}{
		{&r.Users, `SELECT count(*) FROM users`},
		{&r.SMS, `SELECT count(*) FROM notify.sms_log WHERE NOT late`},
		{&r.Unpublished, `SELECT count(*) FROM wallet_events WHERE published_at IS NULL`},
		{&r.Phantom, `SELECT count(*) FROM notify.sms_log l WHERE NOT EXISTS (SELECT 1 FROM wallet_events e WHERE e.user_id = l.user_id AND e.seq = l.seq)`},
		// The text ends with the balance after the event: "… Balance: 154.04 CNY." / "…，余额 154.04 CNY。"
		{&r.WrongText, `SELECT count(*) FROM notify.sms_log l JOIN wallet_events e ON e.user_id = l.user_id AND e.seq = l.seq
			CROSS JOIN LATERAL (SELECT to_char(e.balance_after / 100.0, 'FM9999999999999999990.00') || ' ' || e.currency AS s) b
			WHERE NOT l.late AND right(l.text, length(b.s) + 1) NOT IN (b.s || '.', b.s || '。')`},
	} {
		if err := scalar(q.dst, q.sql); err != nil {
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
		case sms == 0 && status == "dead_lettered" && failPhone.MatchString(phone):
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
// unpublished, no event without a finished notification. It also says what is left.
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

// Impact is how long one fault held the pipeline up, read from the database afterwards.
type Impact struct {
	// LongestGap is the longest time without any SMS written, in the minute after the fault.
	LongestGap time.Duration
	// MaxLatency is the longest commit→SMS time of the events committed from the fault until
	// 20 s after it ended.
	MaxLatency time.Duration
	Events     int
}

// MeasureImpact reads the SMS log around a fault that lasted from start to end.
func MeasureImpact(ctx context.Context, db *pgxpool.Pool, start, end time.Time) (Impact, error) {
	var im Impact
	var gap, lat float64
	err := db.QueryRow(ctx, `SELECT COALESCE(max(g), 0) FROM (
		SELECT extract(epoch FROM sent_at - lag(sent_at) OVER (ORDER BY sent_at)) AS g
		FROM notify.sms_log WHERE sent_at BETWEEN $1::timestamptz AND $2::timestamptz + interval '60 seconds'
		UNION ALL SELECT extract(epoch FROM min(sent_at) - $1::timestamptz) FROM notify.sms_log WHERE sent_at >= $1::timestamptz) s`, start, end).Scan(&gap)
	if err != nil {
		return im, err
	}
	err = db.QueryRow(ctx, `SELECT COALESCE(max(extract(epoch FROM l.sent_at - e.occurred_at)), 0), count(*)
		FROM wallet_events e JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
		WHERE e.occurred_at BETWEEN $1::timestamptz AND $2::timestamptz + interval '20 seconds'`, start, end).Scan(&lat, &im.Events)
	if err != nil {
		return im, err
	}
	im.LongestGap = time.Duration(gap * float64(time.Second)).Round(time.Millisecond)
	im.MaxLatency = time.Duration(lat * float64(time.Second)).Round(time.Millisecond)
	return im, nil
}

// Baseline is the commit→SMS latency over the whole run.
func Baseline(ctx context.Context, db *pgxpool.Pool) (p50, p99 time.Duration, err error) {
	var a, b float64
	err = db.QueryRow(ctx, `SELECT COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY x), 0), COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY x), 0)
		FROM (SELECT extract(epoch FROM l.sent_at - e.occurred_at) AS x FROM wallet_events e
		JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late) s`).Scan(&a, &b)
	return time.Duration(a * float64(time.Second)).Round(time.Millisecond), time.Duration(b * float64(time.Second)).Round(time.Millisecond), err
}
