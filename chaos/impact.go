package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/audit"
)

// verdict is the run's last line: its seed and the audit's counts, every one of which but
// users, events and sms must be zero.
func verdict(r audit.Result, seed int64) string {
	return fmt.Sprintf("chaos: seed=%d users=%d events=%d sms=%d lost=%d duplicated=%d out_of_order=%d sagas_stuck=%d ledger_mismatch=%d",
		seed, r.Users, r.Events, r.SMS, r.Lost, r.Duplicated, r.OutOfOrder, r.SagasStuck, r.LedgerMismatch)
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
