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

// BrokerImpact is whom a broker outage held up, from the broker's death until it was back.
type BrokerImpact struct {
	// Held counts the users with a message the broker held: an event committed before the
	// broker died whose message reached the inbox from that broker only after it died (it
	// waited on the broker's disk). HeldMax is their longest commit→SMS in the outage.
	Held    int
	HeldMax time.Duration
	// Others counts everyone else's events committed in the outage; OthersP99 and OthersMax
	// are their commit→SMS times.
	Others               int
	OthersP99, OthersMax time.Duration
}

// MeasureBrokerImpact reads the inbox and the SMS log for an outage of broker from died until
// back (its port open again).
func MeasureBrokerImpact(ctx context.Context, db *pgxpool.Pool, broker string, died, back time.Time) (BrokerImpact, error) {
	var im BrokerImpact
	var heldMax, p99, maxLat float64
	err := db.QueryRow(ctx, `WITH w AS (
			SELECT e.user_id, e.occurred_at, extract(epoch FROM l.sent_at - e.occurred_at) AS lat,
			       (n.queue LIKE $3 || '/%' AND e.occurred_at < $1 AND n.first_seen_at > $1) AS stranded
			FROM wallet_events e
			JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
			JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq
			WHERE e.occurred_at BETWEEN $1::timestamptz - interval '10 seconds' AND $2
		), held AS (SELECT DISTINCT user_id FROM w WHERE stranded),
		others AS (SELECT lat FROM w WHERE occurred_at >= $1 AND user_id NOT IN (SELECT user_id FROM held))
		SELECT (SELECT count(*) FROM held)::int,
		       COALESCE((SELECT max(lat) FROM w WHERE user_id IN (SELECT user_id FROM held)), 0),
		       (SELECT count(*) FROM others)::int,
		       COALESCE((SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY lat) FROM others), 0),
		       COALESCE((SELECT max(lat) FROM others), 0)`, died, back, broker).Scan(&im.Held, &heldMax, &im.Others, &p99, &maxLat)
	im.HeldMax, im.OthersP99, im.OthersMax = seconds(heldMax), seconds(p99), seconds(maxLat)
	return im, err
}

// NewQueueImpact is how soon a change that added queues (a broker joining, the topic
// growing) reached the users it moved onto them.
type NewQueueImpact struct {
	// FirstEvent and FirstText are, after the change, when the first event on an added
	// queue was committed and when the first SMS of such an event was sent.
	FirstEvent, FirstText time.Duration
	// Events on the added queues committed in the 30 s after the change, and their longest
	// commit→SMS.
	Events int
	Max    time.Duration
}

// MeasureNewQueues reads the inbox and the SMS log after a change at changed that added the
// queues of broker (any broker when empty) whose id is at least fromID.
func MeasureNewQueues(ctx context.Context, db *pgxpool.Pool, broker string, fromID int, changed time.Time) (NewQueueImpact, error) {
	var im NewQueueImpact
	var firstEvent, firstSMS, maxLat float64
	err := db.QueryRow(ctx, `WITH w AS (
			SELECT e.occurred_at, l.sent_at
			FROM wallet_events e
			JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
			JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq
			WHERE e.occurred_at >= $1 AND n.queue LIKE $2 || '%/%' AND split_part(n.queue, '/', 2)::int >= $3
		)
		SELECT COALESCE(extract(epoch FROM min(occurred_at) - $1), -1), COALESCE(extract(epoch FROM min(sent_at) - $1), -1),
		       (count(*) FILTER (WHERE occurred_at < $1::timestamptz + interval '30 seconds'))::int,
		       COALESCE(max(extract(epoch FROM sent_at - occurred_at)) FILTER (WHERE occurred_at < $1::timestamptz + interval '30 seconds'), 0)
		FROM w`, changed, broker, fromID).Scan(&firstEvent, &firstSMS, &im.Events, &maxLat)
	im.FirstEvent, im.FirstText, im.Max = seconds(firstEvent), seconds(firstSMS), seconds(maxLat)
	return im, err
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
