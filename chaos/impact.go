package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/harness/audit"
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

// Latency is the commit→SMS time of a set of events: how many, the 99th percentile and the
// longest; and, of the same events, the 99th percentile of commit→inbox (the relay, the
// broker and the consumer) and of inbox→SMS (the lanes and the provider).
type Latency struct {
	Events        int
	P99, Max      time.Duration
	ToInbox, Lane time.Duration
}

func (l Latency) String() string {
	if l.Events == 0 {
		return "no events"
	}
	return fmt.Sprintf("%d events, commit→SMS p99=%.2fs max=%.2fs (p99 commit→inbox %.2fs, inbox→SMS %.2fs)",
		l.Events, l.P99.Seconds(), l.Max.Seconds(), l.ToInbox.Seconds(), l.Lane.Seconds())
}

// latencyOf measures the events committed from start to end that sql's condition (on e, the
// event, and n, its inbox row) selects, with args from $3 on.
func latencyOf(ctx context.Context, db *pgxpool.Pool, start, end time.Time, cond string, args ...any) (Latency, error) {
	var l Latency
	var p99, maxLat, inbox, lane float64
	err := db.QueryRow(ctx, `SELECT count(*)::int,
			COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.sent_at - e.occurred_at)), 0),
			COALESCE(max(extract(epoch FROM l.sent_at - e.occurred_at)), 0),
			COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM n.first_seen_at - e.occurred_at)), 0),
			COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM l.sent_at - n.first_seen_at)), 0)
		FROM wallet_events e
		JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
		JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq
		WHERE e.occurred_at BETWEEN $1 AND $2 AND (`+cond+`)`, append([]any{start, end}, args...)...).Scan(&l.Events, &p99, &maxLat, &inbox, &lane)
	l.P99, l.Max, l.ToInbox, l.Lane = seconds(p99), seconds(maxLat), seconds(inbox), seconds(lane)
	return l, err
}

// FreezeImpact is how a frozen broker held users up: those whose queues are on it, and
// everyone else (on the other brokers), for the events committed while it was frozen.
type FreezeImpact struct {
	Frozen, Others Latency
}

// MeasureFreeze reads the inbox and the SMS log for broker frozen from start to end.
func MeasureFreeze(ctx context.Context, db *pgxpool.Pool, broker string, start, end time.Time) (FreezeImpact, error) {
	var fi FreezeImpact
	var err error
	if fi.Frozen, err = latencyOf(ctx, db, start, end, `split_part(n.queue, '/', 1) = $3`, broker); err != nil {
		return fi, err
	}
	fi.Others, err = latencyOf(ctx, db, start, end, `split_part(n.queue, '/', 1) <> $3`, broker)
	return fi, err
}

// QueueLatency is, for one queue the notifier received events from, how the events
// committed in a window fared: how many, and the longest commit→published (the relay),
// commit→inbox (the broker and the consumer) and commit→SMS.
type QueueLatency struct {
	Queue                        string
	Events                       int
	ToPublished, ToInbox, ToText time.Duration
}

func (q QueueLatency) String() string {
	return fmt.Sprintf("queue %-12s %4d events, max commit→published %6.2fs, →inbox %6.2fs, →SMS %6.2fs",
		q.Queue, q.Events, q.ToPublished.Seconds(), q.ToInbox.Seconds(), q.ToText.Seconds())
}

// MeasureFreezeQueues breaks the events committed from start to end down by the queue they
// arrived on, slowest first: whether a late event waited at the relay or after it.
func MeasureFreezeQueues(ctx context.Context, db *pgxpool.Pool, start, end time.Time) ([]QueueLatency, error) {
	rows, err := db.Query(ctx, `SELECT n.queue, count(*)::int,
			COALESCE(max(extract(epoch FROM e.published_at - e.occurred_at)), 0),
			COALESCE(max(extract(epoch FROM n.first_seen_at - e.occurred_at)), 0),
			COALESCE(max(extract(epoch FROM l.sent_at - e.occurred_at)), 0)
		FROM wallet_events e
		JOIN notify.notifications n ON n.user_id = e.user_id AND n.seq = e.seq
		LEFT JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late
		WHERE e.occurred_at BETWEEN $1 AND $2
		GROUP BY n.queue ORDER BY 5 DESC, 1`, start, end)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (QueueLatency, error) {
		var q QueueLatency
		var pub, inbox, sms float64
		err := row.Scan(&q.Queue, &q.Events, &pub, &inbox, &sms)
		q.ToPublished, q.ToInbox, q.ToText = seconds(pub), seconds(inbox), seconds(sms)
		return q, err
	})
}

// TakeOver is how a frozen notifier's leased users fared: how many it held, how many of
// the SMS it was on (each user's next) were recorded finished before it resumed (by a
// replica: it could record nothing), and the shortest and longest time from its stop to
// those records.
type TakeOver struct {
	Leased, BeforeResume int
	First, Last          time.Duration
}

// leasedUser is a user a lane held, and the last seq finished for it then.
type leasedUser struct{ User, LastSeq int64 }

// MeasureTakeOver reads the inbox for users leased by a notifier stopped from start to end.
func MeasureTakeOver(ctx context.Context, db *pgxpool.Pool, leased []leasedUser, start, end time.Time) (TakeOver, error) {
	t := TakeOver{Leased: len(leased)}
	var users, seqs []int64
	for _, l := range leased {
		users, seqs = append(users, l.User), append(seqs, l.LastSeq+1)
	}
	rows, err := db.Query(ctx, `SELECT extract(epoch FROM n.finished_at - $3::timestamptz)
		FROM unnest($1::bigint[], $2::bigint[]) k(user_id, seq)
		JOIN notify.notifications n ON n.user_id = k.user_id AND n.seq = k.seq
		WHERE n.finished_at > $3 AND n.finished_at < $4`, users, seqs, start, end)
	if err != nil {
		return t, err
	}
	waits, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	if err != nil {
		return t, err
	}
	for i, w := range waits {
		d := seconds(w)
		if i == 0 || d < t.First {
			t.First = d
		}
		t.Last = max(t.Last, d)
	}
	t.BeforeResume = len(waits)
	return t, nil
}

// GarbleOutcome is what became of the SMS the provider answered with garbled errors: those
// refused for good (a 400) and those failed for a while (a 500), by their notification's
// status; and how many failure reasons were stored from a garbled reply.
type GarbleOutcome struct {
	Refused, Retried map[string]int
	StoredReasons    int
}

// MeasureGarble reads the notifications of the SMS refused and retried.
func MeasureGarble(ctx context.Context, db *pgxpool.Pool, refused, retried [][2]int64) (GarbleOutcome, error) {
	g := GarbleOutcome{Refused: map[string]int{}, Retried: map[string]int{}}
	for _, set := range []struct {
		sms [][2]int64
		out map[string]int
	}{{refused, g.Refused}, {retried, g.Retried}} {
		var users, seqs []int64
		for _, k := range set.sms {
			users, seqs = append(users, k[0]), append(seqs, k[1])
		}
		rows, err := db.Query(ctx, `SELECT COALESCE(n.status, 'missing'), count(*)::int
			FROM unnest($1::bigint[], $2::bigint[]) k(user_id, seq)
			LEFT JOIN notify.notifications n ON n.user_id = k.user_id AND n.seq = k.seq GROUP BY 1`, users, seqs)
		if err != nil {
			return g, err
		}
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				rows.Close()
				return g, err
			}
			set.out[status] = n
		}
		if err := rows.Err(); err != nil {
			return g, err
		}
	}
	err := db.QueryRow(ctx, `SELECT count(*)::int FROM notify.notifications WHERE strpos(last_error, $1) > 0`, garbleMark).Scan(&g.StoredReasons)
	return g, err
}

// LockImpact is how a held lock delayed what waited behind it: the SMS of the users whose
// progress rows were locked, the SMS of the outbox rows it held (which need not wait for
// their rows to be marked published), and everyone else's SMS meanwhile. (The sagas of the
// users whose wallet rows were locked wait for it too: their statements show among the
// cut-off ones.)
type LockImpact struct {
	Progress      Latency
	OutboxLatency time.Duration // longest commit→SMS of the outbox rows held
	Others        Latency
}

// MeasureLock reads the inbox and the SMS log for locks h held from start to end.
func MeasureLock(ctx context.Context, db *pgxpool.Pool, h heldLocks, start, end time.Time) (LockImpact, error) {
	var li LockImpact
	var sms float64
	err := db.QueryRow(ctx, `SELECT COALESCE(max(extract(epoch FROM l.sent_at - e.occurred_at)), 0) FROM wallet_events e
		JOIN notify.sms_log l ON l.user_id = e.user_id AND l.seq = e.seq AND NOT l.late WHERE e.id = ANY($1)`, h.Outbox).Scan(&sms)
	if err != nil {
		return li, err
	}
	li.OutboxLatency = seconds(sms)
	// The progress rows' users: their events from a little before the lock (already in the
	// inbox, waiting for their lane) until its end.
	if li.Progress, err = latencyOf(ctx, db, start.Add(-10*time.Second), end, `e.user_id = ANY($3)`, h.Progress); err != nil {
		return li, err
	}
	li.Others, err = latencyOf(ctx, db, start, end, `e.user_id <> ALL($3)`, append(slices.Clone(h.Wallets), h.Progress...))
	return li, err
}
