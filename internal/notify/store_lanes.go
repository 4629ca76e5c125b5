package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/puddle/v2"

	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/pg"
)

// This file holds the SQL of the inbox, the lanes and the dead-letter intents: every
// statement that moves an SMS from "received" to "finished".

// Inbound is one message as the inbox records it: a decoded wallet event with its rendered
// SMS text, or, when Bad is set, an undecodable message kept with its reason.
type Inbound struct {
	MsgID  string
	Queue  string
	Offset int64
	Body   []byte

	UserID int64
	Seq    int64
	Kind   string
	Text   string

	Bad string // why the message could not be decoded; empty for a good one
}

// Received is what one inbox write did.
type Received struct {
	Inserted   int // new (user, seq) rows in the inbox
	Ignored    int // redeliveries of what the inbox holds or finished already
	Bad        int // undecodable messages recorded for the DLQ
	Baselines  int // users first seen past seq 1 that start there (CONSUME_FROM=last)
	Duplicates int // bad messages seen before
}

// Receive records a batch of messages in ONE statement (so one transaction): each good
// message becomes a pending inbox row unless its (user, seq) is there or finished already,
// each user with a new row is woken for the lanes (a row appended to notify.wakes; a user
// seen for the first time also gets its progress row, due), and each bad message is
// recorded with its reason and a dead-letter intent. It locks no row a lane may hold, so a
// queue never waits for a lane. fromLast makes a user the inbox has never seen start
// at the lowest seq of its first batch, recorded as its baseline; otherwise it starts at 1.
func (s *Store) Receive(ctx context.Context, batch []Inbound, fromLast bool) (Received, error) {
	var (
		users, seqs                   []int64
		msgIDs, events, kinds, texts  []string
		queues                        []string
		badIDs, badQueues, badReasons []string
		badOffsets                    []int64
		badBodies                     [][]byte
		good                          int
	)
	for _, m := range batch {
		if m.Bad != "" {
			badIDs, badQueues, badOffsets, badReasons = append(badIDs, m.MsgID), append(badQueues, m.Queue), append(badOffsets, m.Offset), append(badReasons, m.Bad)
			body := m.Body
			if body == nil {
				body = []byte{}
			}
			badBodies = append(badBodies, body)
			continue
		}
		good++
		users, seqs = append(users, m.UserID), append(seqs, m.Seq)
		msgIDs, events, kinds, texts = append(msgIDs, m.MsgID), append(events, string(m.Body)), append(kinds, m.Kind), append(texts, m.Text)
		queues = append(queues, m.Queue)
	}
	var r Received
	err := s.db.QueryRow(ctx, `
		WITH ev AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $13::text[])
				AS ev(user_id, seq, msg_id, event, kind, text, queue)
		), firsts AS (
			SELECT user_id, min(seq) AS first_seq FROM ev GROUP BY user_id
		), known AS (
			-- A plain read: the inbox write never locks or updates a known user's progress
			-- row, so it never waits for a lane recording that user.
			SELECT p.user_id, p.last_seq FROM notify.progress p WHERE p.user_id IN (SELECT user_id FROM firsts)
		), ins AS (
			INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text, queue)
			SELECT DISTINCT ON (ev.user_id, ev.seq) ev.user_id, ev.seq, 'pending', ev.msg_id, ev.event, ev.kind, ev.text, NULLIF(ev.queue, '')
			FROM ev
			JOIN firsts f ON f.user_id = ev.user_id
			LEFT JOIN known k ON k.user_id = ev.user_id
			WHERE ev.seq > COALESCE(k.last_seq, CASE WHEN $7 THEN f.first_seq - 1 ELSE 0 END)
			ORDER BY ev.user_id, ev.seq
			ON CONFLICT (user_id, seq) DO NOTHING
			RETURNING user_id, seq
		), fresh AS (
			INSERT INTO notify.progress (user_id, last_seq, due_at, baseline_seq, baseline_at)
			SELECT f.user_id,
			       CASE WHEN $7 THEN f.first_seq - 1 ELSE 0 END,
			       now(),
			       CASE WHEN $7 AND f.first_seq > 1 THEN f.first_seq END,
			       CASE WHEN $7 AND f.first_seq > 1 THEN now() END
			FROM firsts f
			WHERE f.user_id IN (SELECT user_id FROM ins) AND f.user_id NOT IN (SELECT user_id FROM known)
			ORDER BY f.user_id
			ON CONFLICT (user_id) DO NOTHING
			RETURNING baseline_seq IS NOT NULL AS baselined
		), woken AS (
			INSERT INTO notify.wakes (user_id)
			SELECT DISTINCT user_id FROM ins
		), bad AS (
			INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason)
			SELECT * FROM unnest($8::text[], $9::text[], $10::bigint[], $11::bytea[], $12::text[])
			ON CONFLICT (msg_id) DO NOTHING
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM ins)::int, (SELECT count(*) FROM bad)::int,
		       (SELECT count(*) FROM fresh WHERE baselined)::int`,
		users, seqs, msgIDs, events, kinds, texts, fromLast,
		badIDs, badQueues, badOffsets, badBodies, badReasons, queues).Scan(&r.Inserted, &r.Bad, &r.Baselines)
	if err != nil {
		return Received{}, fmt.Errorf("inbox: record %d messages: %w", len(batch), err)
	}
	r.Ignored = good - r.Inserted
	r.Duplicates = len(badIDs) - r.Bad
	return r, nil
}

// head is a user's next SMS as a lane sees it: the inbox row at last_seq + 1, if any.
type head struct {
	UserID   int64
	Seq      int64
	Status   string // "" when the row is missing
	Attempts int
	Age      time.Duration // since its first attempt, on the database's clock
	ReadAt   time.Time     // when it was read, on this process's monotonic clock
	MsgID    string
	Event    []byte
}

// claim is a user a lane took: its next SMS (Heads[0], Status "" when it has not arrived)
// and those after it in the inbox, in seq order without gaps (at most the run asked for).
//
// The heads are read in the same snapshot in which the statement deletes the user's wake
// rows: a wake row it deletes is one whose SMS it read. An inbox write that lands after the
// snapshot leaves its wake row in place, so a lane that gives the user back as idle without
// having seen it never strands it: the next claim takes the user again.
type claim struct {
	UserID int64
	Heads  []head
	// Fence is the user's fence after this claim: each claim takes a new one, and a record or
	// a give-back applies only under it.
	Fence int64
}

// headsJoin reads, for a user u whose next seq is s, the inbox rows s .. s+run-1 (LEFT JOIN
// LATERAL: one row of NULLs when there are none); headColumns selects them.
const (
	headsJoin = `LEFT JOIN LATERAL (
			SELECT * FROM notify.notifications n WHERE n.user_id = %[1]s AND n.seq >= %[2]s AND n.seq < %[2]s + %[3]s ORDER BY n.seq
		) n ON true`
	headColumns = `n.seq, COALESCE(n.status, ''), COALESCE(n.attempts, 0),
	COALESCE(extract(epoch FROM now() - n.first_attempt_at), 0)::float8, COALESCE(n.msg_id, ''), COALESCE(n.event::text, '')`
)

// scanClaims reads rows of (user, next seq, headColumns...) into one claim per user,
// its heads cut at the first gap.
func scanClaims(rows pgx.Rows) ([]claim, error) {
	defer rows.Close()
	var out []claim
	now := time.Now()
	for rows.Next() {
		var (
			user, next int64
			seq        *int64
			h          head
			age        float64
			event      string
		)
		if err := rows.Scan(&user, &next, &seq, &h.Status, &h.Attempts, &age, &h.MsgID, &event); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].UserID != user {
			out = append(out, claim{UserID: user, Heads: []head{{UserID: user, Seq: next, ReadAt: now}}})
		}
		c := &out[len(out)-1]
		last := c.Heads[len(c.Heads)-1]
		switch {
		case seq == nil:
			continue // no row at all: the missing head stays
		case last.Status == "" && *seq == last.Seq:
			// the first row is the head itself
		case last.Status != "" && *seq == last.Seq+1:
			c.Heads = append(c.Heads, head{})
		default:
			continue // a gap: the run ends before it
		}
		h.UserID, h.Seq, h.ReadAt = user, *seq, now
		h.Age = time.Duration(age * float64(time.Second))
		if event != "" {
			h.Event = []byte(event)
		}
		c.Heads[len(c.Heads)-1] = h
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// claimUsers leases up to n users whose lane is due (due_at has come, or an inbox write woke
// them while idle) and free, longest waiting first, for lease, and returns each with up to run of its
// next SMS and the new fence the claim took. Replicas share the work: SKIP LOCKED passes over users another statement is
// taking or recording at the same moment, and a leased user is not claimable until its
// lease runs out (a lane that died) or is given back.
func (s *Store) claimUsers(ctx context.Context, owner string, n int, lease time.Duration, run int) ([]claim, error) {
	rows, err := s.db.Query(ctx, `
		WITH cand AS (
			SELECT user_id, min(at) AS at FROM (
				(SELECT user_id, due_at AS at FROM notify.progress
				 WHERE due_at <= now() AND (lane_until IS NULL OR lane_until < now())
				 ORDER BY due_at LIMIT $2)
				UNION ALL
				-- News wakes an idle user only (due_at NULL): one waiting for a retry or held
				-- back by the breaker (due_at to come) waits for it, news or not.
				(SELECT w.user_id, w.at FROM notify.wakes w JOIN notify.progress p ON p.user_id = w.user_id
				 WHERE p.due_at IS NULL AND (p.lane_until IS NULL OR p.lane_until < now())
				 ORDER BY w.at LIMIT 4 * $2)
			) x GROUP BY user_id
		), c AS (
			SELECT p.user_id FROM notify.progress p JOIN cand ON cand.user_id = p.user_id
			WHERE (p.lane_until IS NULL OR p.lane_until < now()) AND (p.due_at IS NULL OR p.due_at <= now())
			ORDER BY cand.at, p.user_id
			LIMIT $2
			FOR UPDATE OF p SKIP LOCKED
		), claimed AS (
			-- due_at stays set while the user is leased: should this lane die, the user is
			-- due again once the lease runs out.
			UPDATE notify.progress p SET lane_owner = $1, lane_until = now() + $3::bigint * interval '1 microsecond',
				due_at = COALESCE(p.due_at, now()), fence = p.fence + 1
			FROM c WHERE p.user_id = c.user_id
			RETURNING p.user_id, p.last_seq, p.fence
		), seen AS (
			DELETE FROM notify.wakes w USING claimed WHERE w.user_id = claimed.user_id
		)
		SELECT claimed.user_id, claimed.last_seq + 1, `+headColumns+`, claimed.fence
		FROM claimed
		`+fmt.Sprintf(headsJoin, "claimed.user_id", "claimed.last_seq + 1", "$4")+`
		ORDER BY claimed.user_id, n.seq`,
		owner, n, lease.Microseconds(), max(run, 1))
	if err != nil {
		return nil, fmt.Errorf("lanes: claim: %w", err)
	}
	fences := map[int64]int64{}
	var fence int64
	out, err := scanClaims(&extraRows{Rows: rows, extra: []any{&fence}, after: func(dest []any) {
		fences[*dest[0].(*int64)] = fence
	}})
	if err != nil {
		return nil, fmt.Errorf("lanes: claim: %w", err)
	}
	for i := range out {
		out[i].Fence = fences[out[i].UserID]
	}
	return out, nil
}

// verdictAdvance moves a user past a head that is finished already (the DLQ reconciler can
// record a dead letter ahead of the lane).
const verdictAdvance Verdict = "advance"

// outcome is what a lane records for one user's head.
type outcome struct {
	// OccurredAt is when the wallet committed the event, for the commit→SMS observer (not
	// stored).
	OccurredAt time.Time

	UserID   int64
	Seq      int64
	Verdict  Verdict
	Attempts int
	Delay    time.Duration // Retry, Postponed: until the user is due again
	Reason   string
	Text     string
	Phone    string
	Journal  bool          // write the SMS log row (the log sender's delivery) with a Sent
	Fence    int64         // the fence of the claim the lane holds the user under
	Age      time.Duration // since the SMS's first attempt (not stored: the policy's input)
}

// recorded is what the store answers for one user's outcomes.
type recorded struct {
	Held bool // the lane still held the user: the outcomes were recorded
	// Released: the user had nothing more to send, and the record gave it back (idle).
	Released bool
	Heads    []head // the SMS after them (after Sent, DeadLettered, advance)
}

// record writes a batch of outcomes in ONE statement. A user may have several: a run of
// consecutive seqs, each Sent but the last, which may have any verdict (a journaled sender
// delivers a user's waiting SMS together). Per user: its
// progress (fenced: the user must still be leased under the outcomes' fence, which a later
// claim replaces, and the first seq must be last_seq + 1), the notification rows, and for a
// journaled Sent the SMS log rows, all or nothing; then
// it reads up to run of each advanced user's next SMS. Users whose fence failed are left out
// of the answer.
func (s *Store) record(ctx context.Context, lease time.Duration, run int, batch []outcome) (map[int64]recorded, error) {
	n := len(batch)
	users, seqs, delays, fences := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	verdicts, reasons, texts, phones := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	attempts, journal := make([]int32, n), make([]bool, n)
	for i, o := range batch {
		users[i], seqs[i], delays[i], fences[i] = o.UserID, o.Seq, o.Delay.Microseconds(), o.Fence
		verdicts[i], reasons[i], texts[i], phones[i] = string(o.Verdict), freetext.Clip(o.Reason, maxReason), o.Text, o.Phone
		attempts[i], journal[i] = int32(o.Attempts), o.Journal //nolint:gosec // G115: the column is an integer; the retry policy stops far below 2^31 attempts
	}
	rows, err := s.db.Query(ctx, `
		WITH o AS (
			SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::int[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::bool[], $12::bigint[])
				AS o(user_id, seq, verdict, attempts, delay_us, reason, text, phone, journal, fence)
		), lk AS MATERIALIZED (
			-- Lock the users' progress rows in user order before changing anything: two
			-- records (of two replicas, after a lease passed) then never deadlock. A locked
			-- row reads as its newest version, which nobody else can change until this
			-- statement commits: the fence is decided on it.
			SELECT p.user_id, p.lane_owner, p.fence, p.last_seq FROM notify.progress p
			WHERE p.user_id IN (SELECT user_id FROM o)
			ORDER BY p.user_id
			FOR UPDATE
		), u AS (
			-- One row per user: its first and last seq, the verdict of the last (a run is
			-- Sent but for its last, which may be anything), and held, the fence: the user is
			-- still leased under the fence the lane claimed it with (a later claim took a new
			-- one; a give-back, or a restart under the same owner name, cleared the lease) and
			-- the run starts at its last_seq + 1. It reads every
			-- lock of lk before it yields a row. (lk's columns go through aggregates, one
			-- row per user anyway, so that grouping by the user alone keeps the planner's
			-- estimate of the users.)
			SELECT o.user_id, min(o.seq) AS first_seq, max(o.seq) AS last_seq,
			       (array_agg(o.verdict ORDER BY o.seq DESC))[1] AS verdict, max(o.delay_us) AS delay_us,
			       bool_and(lk.lane_owner IS NOT NULL AND lk.fence = o.fence) AND min(lk.last_seq) = min(o.seq) - 1 AS held
			FROM o JOIN lk ON lk.user_id = o.user_id
			GROUP BY o.user_id ORDER BY o.user_id
		), st AS (
			-- idle: the user has nothing more to send (its next seq is not in the inbox, read
			-- in this statement's snapshot): the lane gives it back here, without a statement
			-- of its own. An inbox write this snapshot does not see keeps its wake row (seen
			-- deletes only the rows of this snapshot), so the next claim takes the user again.
			-- (LATERAL ... LIMIT 1, not EXISTS: the planner may turn an EXISTS into a hash
			-- of the whole inbox.)
			SELECT u.*,
			       u.verdict IN ('sent', 'dead_lettered', 'advance') AND nx.seq IS NULL AS idle,
			       lt.seq IS NOT NULL AS later
			FROM u
			LEFT JOIN LATERAL (SELECT n.seq FROM notify.notifications n
				WHERE n.user_id = u.user_id AND n.seq = u.last_seq + 1 LIMIT 1) nx ON true
			LEFT JOIN LATERAL (SELECT n.seq FROM notify.notifications n
				WHERE n.user_id = u.user_id AND n.seq > u.last_seq + 1 AND n.status = 'pending' LIMIT 1) lt ON true
			WHERE u.held
		), adv AS (
			UPDATE notify.progress p SET
				last_seq   = CASE WHEN st.verdict IN ('retry', 'postponed') THEN st.last_seq - 1 ELSE st.last_seq END,
				due_at     = CASE WHEN st.verdict IN ('retry', 'postponed') THEN now() + st.delay_us * interval '1 microsecond'
				                  WHEN st.idle THEN NULL ELSE p.due_at END,
				lane_owner = CASE WHEN st.verdict IN ('retry', 'postponed') OR st.idle THEN NULL ELSE p.lane_owner END,
				lane_until = CASE WHEN st.verdict IN ('retry', 'postponed') OR st.idle THEN NULL
				                  ELSE now() + $1::bigint * interval '1 microsecond' END,
				gap_since  = CASE WHEN st.idle AND st.later THEN COALESCE(p.gap_since, now()) END,
				updated_at = now()
			FROM st
			WHERE p.user_id = st.user_id -- st holds only the users whose fence held (u.held)
			RETURNING p.user_id, st.idle
		), upd AS (
			-- upd and logged join the outcomes with st (the held users, estimated from the
			-- outcomes), not with adv: the planner takes an UPDATE's output for one row and
			-- joined every user with every outcome, quadratic in the batch (0.5 s of a
			-- 0.75 s record of 8,192 SMS).
			UPDATE notify.notifications n SET
				status           = CASE WHEN o.verdict IN ('sent', 'dead_lettered') THEN o.verdict ELSE n.status END,
				attempts         = o.attempts,
				first_attempt_at = COALESCE(n.first_attempt_at, now()),
				last_error       = CASE WHEN o.verdict = 'sent' THEN n.last_error ELSE NULLIF(o.reason, '') END,
				text             = COALESCE(NULLIF(o.text, ''), n.text),
				finished_at      = CASE WHEN o.verdict IN ('sent', 'dead_lettered') THEN now() ELSE n.finished_at END,
				updated_at       = now()
			FROM o JOIN st ON st.user_id = o.user_id
			WHERE n.user_id = o.user_id AND n.seq = o.seq AND o.verdict <> 'advance' AND n.status = 'pending'
		), logged AS (
			INSERT INTO notify.sms_log (user_id, seq, phone, text, late)
			SELECT o.user_id, o.seq, o.phone, o.text, false
			FROM o JOIN st ON st.user_id = o.user_id
			WHERE o.verdict = 'sent' AND o.journal
			ORDER BY o.user_id, o.seq
			ON CONFLICT (user_id, seq) WHERE NOT late DO NOTHING
		), seen AS (
			DELETE FROM notify.wakes w USING adv WHERE w.user_id = adv.user_id
		)
		SELECT adv.user_id, u.last_seq + 1, `+headColumns+`, adv.idle
		FROM adv
		JOIN u ON u.user_id = adv.user_id
		`+fmt.Sprintf(headsJoin, "adv.user_id", "u.last_seq + 1",
		"(CASE WHEN u.verdict IN ('retry', 'postponed') OR adv.idle THEN 0 ELSE $11 END)")+`
		ORDER BY adv.user_id, n.seq`,
		lease.Microseconds(), users, seqs, verdicts, attempts, delays, reasons, texts, phones, journal, max(run, 1), fences)
	if err != nil {
		return nil, fmt.Errorf("lanes: record %d outcomes: %w", n, err)
	}
	idle := map[int64]bool{}
	var user int64
	var released bool
	got, err := scanClaims(&extraRows{Rows: rows, extra: []any{&released}, after: func(dest []any) {
		user = *dest[0].(*int64)
		idle[user] = released
	}})
	if err != nil {
		return nil, fmt.Errorf("lanes: record %d outcomes: %w", n, err)
	}
	out := make(map[int64]recorded, len(got))
	for _, c := range got {
		out[c.UserID] = recorded{Held: true, Released: idle[c.UserID], Heads: c.Heads}
	}
	return out, nil
}

// release gives a user back. With requeue the user is due again at once (a lane that has
// worked on it long enough lets others have a turn); otherwise it is idle: not due, and
// marked as waiting on a gap when later seqs are in the inbox while its next is not. An
// inbox write the lane has not seen still has its wake row, so the next claim takes the user
// again. Nothing happens unless the user is still leased under fence.
func (s *Store) release(ctx context.Context, user, fence int64, requeue bool) error {
	_, err := s.db.Exec(ctx, `
		UPDATE notify.progress p SET lane_owner = NULL, lane_until = NULL,
			due_at = CASE WHEN $3 THEN now() END,
			gap_since = CASE
				WHEN NOT $3 AND EXISTS (SELECT 1 FROM notify.notifications n
					WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
				THEN COALESCE(p.gap_since, now()) END,
			updated_at = now()
		WHERE p.user_id = $1 AND p.fence = $2 AND p.lane_owner IS NOT NULL`, user, fence, requeue)
	if err != nil {
		return fmt.Errorf("lanes: release user %d: %w", user, err)
	}
	return nil
}

// extraRows scans the trailing columns of a claim-shaped query into extra, and tells after
// (when set) what a row scanned.
type extraRows struct {
	pgx.Rows
	extra []any
	after func(dest []any)
}

func (r *extraRows) Scan(dest ...any) error {
	if err := r.Rows.Scan(append(dest, r.extra...)...); err != nil {
		return err
	}
	if r.after != nil {
		r.after(dest)
	}
	return nil
}

// releaseAll gives back every user leased by owner, due at once: at shutdown, and at the
// start of a process that took over a stable name (its predecessor's leases are its own).
func (s *Store) releaseAll(ctx context.Context, owner string) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE notify.progress SET lane_owner = NULL, lane_until = NULL,
		due_at = COALESCE(due_at, now()), updated_at = now() WHERE lane_owner = $1`, owner)
	if err != nil {
		return 0, fmt.Errorf("lanes: release the leases of %s: %w", owner, err)
	}
	return tag.RowsAffected(), nil
}

// DeadLetterIntent is a dead letter to publish to the DLQ topic: a dead-lettered SMS, or an
// undecodable message.
type DeadLetterIntent struct {
	UserID int64 // 0 for an undecodable message
	Seq    int64
	MsgID  string
	Body   []byte
	Reason string
}

// Key is how the intent is known in the DLQ: "user:seq", or the message id of a bad message.
func (d DeadLetterIntent) Key() string {
	if d.UserID == 0 {
		return d.MsgID
	}
	return fmt.Sprintf("%d:%d", d.UserID, d.Seq)
}

// deadLetterIntents returns up to limit dead letters not yet published to the DLQ, oldest
// first: dead-lettered SMS, then undecodable messages.
func (s *Store) deadLetterIntents(ctx context.Context, limit int) ([]DeadLetterIntent, error) {
	rows, err := s.db.Query(ctx, `
		(SELECT user_id, seq, COALESCE(msg_id, ''), convert_to(COALESCE(event::text, ''), 'UTF8'), COALESCE(last_error, '')
		 FROM notify.notifications WHERE status = 'dead_lettered' AND dlq_published_at IS NULL
		 ORDER BY finished_at, user_id, seq LIMIT $1)
		UNION ALL
		(SELECT 0, 0, msg_id, body, reason FROM notify.bad_messages WHERE dlq_published_at IS NULL
		 ORDER BY received_at LIMIT $1)`, limit)
	if err != nil {
		return nil, fmt.Errorf("dead-letter intents: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeadLetterIntent])
	if err != nil {
		return nil, fmt.Errorf("dead-letter intents: %w", err)
	}
	return out, nil
}

// markDeadLettersPublished records that these intents are in the DLQ topic.
func (s *Store) markDeadLettersPublished(ctx context.Context, done []DeadLetterIntent) error {
	var users, seqs []int64
	var msgIDs []string
	for _, d := range done {
		if d.UserID == 0 {
			msgIDs = append(msgIDs, d.MsgID)
		} else {
			users, seqs = append(users, d.UserID), append(seqs, d.Seq)
		}
	}
	_, err := s.db.Exec(ctx, `
		WITH n AS (
			UPDATE notify.notifications n SET dlq_published_at = now()
			FROM unnest($1::bigint[], $2::bigint[]) AS d(user_id, seq)
			WHERE n.user_id = d.user_id AND n.seq = d.seq AND n.dlq_published_at IS NULL
		)
		UPDATE notify.bad_messages SET dlq_published_at = now() WHERE msg_id = ANY($3) AND dlq_published_at IS NULL`,
		users, seqs, msgIDs)
	if err != nil {
		return fmt.Errorf("mark %d dead letters published: %w", len(done), err)
	}
	return nil
}

// recordFoundInDLQ makes sure a (user, seq) found in the DLQ topic is recorded: the
// reconciler's half of "dead letters, consistent both ways". A row the inbox has already
// (pending or finished) is left alone — the lane decides a pending one; a missing one is
// recorded dead-lettered and published, and its user woken so a lane moves past it. It
// reports whether it recorded anything.
func (s *Store) recordFoundInDLQ(ctx context.Context, m Inbound, reason string) (bool, error) {
	var recorded bool
	err := s.db.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text, last_error, finished_at, dlq_published_at)
			SELECT $1, $2, 'dead_lettered', $3, $4::jsonb, $5, $6, $7, now(), now()
			WHERE NOT EXISTS (SELECT 1 FROM notify.progress p WHERE p.user_id = $1 AND p.last_seq >= $2)
			ON CONFLICT (user_id, seq) DO NOTHING
			RETURNING user_id
		), fresh AS (
			INSERT INTO notify.progress (user_id, due_at)
			SELECT user_id, now() FROM ins
			ON CONFLICT (user_id) DO NOTHING
		), woken AS (
			INSERT INTO notify.wakes (user_id) SELECT user_id FROM ins
		)
		SELECT EXISTS (SELECT 1 FROM ins)`,
		m.UserID, m.Seq, m.MsgID, string(m.Body), m.Kind, m.Text, freetext.Clip(reason, maxReason)).Scan(&recorded)
	if err != nil {
		return false, fmt.Errorf("record dead letter %d:%d found in the DLQ: %w", m.UserID, m.Seq, err)
	}
	return recorded, nil
}

// recordBadMessage stores an undecodable message with its reason, once per message id,
// without a dead-letter intent: the reconciler calls it for what it found in the DLQ.
func (s *Store) recordBadMessage(ctx context.Context, m Inbound, published bool) error {
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	_, err := s.db.Exec(ctx, `INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, dlq_published_at)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN now() END) ON CONFLICT (msg_id) DO NOTHING`,
		m.MsgID, m.Queue, m.Offset, body, m.Bad, published)
	if err != nil {
		return fmt.Errorf("record bad message %s: %w", m.MsgID, err)
	}
	return nil
}

// ErrNotHeld means an operator asked to skip a seq no user is held by: the user's next seq
// (last_seq + 1) is not that one, or nothing later waits behind it.
var ErrNotHeld = errors.New("notify: the user is not held by that missing seq")

// ErrNotLost means the seq an operator asked to skip has arrived: it is in the inbox or
// finished, so it is not lost and must not be skipped.
var ErrNotLost = errors.New("notify: that seq has arrived; it is not lost")

// Skip records the missing seq of a held user as skipped_by_operator and advances the user
// past it (and past any finished successors), in one transaction with audit, which records
// who skipped it and why; the user is then due, so its waiting SMS go out. seq must be
// last_seq + 1 of a user with later SMS waiting (else ErrNotHeld), and must never have
// arrived (else ErrNotLost). It returns the user's new progress.
func (s *Store) Skip(ctx context.Context, userID, seq int64, reason string, audit func(ctx context.Context, tx pgx.Tx) error) (int64, error) {
	var last int64
	err := pg.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		var waiting bool
		err := tx.QueryRow(ctx, `SELECT p.last_seq, EXISTS (SELECT 1 FROM notify.notifications n
				WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
			FROM notify.progress p WHERE p.user_id = $1 FOR UPDATE`, userID).Scan(&last, &waiting)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotHeld
		}
		if err != nil {
			return err
		}
		if seq != last+1 || !waiting {
			return ErrNotHeld
		}
		var status string
		err = tx.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2`, userID, seq).Scan(&status)
		if err == nil {
			return fmt.Errorf("%w (status %s)", ErrNotLost, status)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status, last_error, finished_at)
			VALUES ($1, $2, 'skipped_by_operator', $3, now())`, userID, seq, freetext.Clip("skipped by an operator: "+reason, maxReason)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
			WITH RECURSIVE run(s) AS (
				SELECT $2::bigint
				UNION ALL
				SELECT n.seq FROM notify.notifications n JOIN run ON n.user_id = $1 AND n.seq = run.s + 1
				WHERE n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
			)
			UPDATE notify.progress SET last_seq = (SELECT max(s) FROM run), due_at = now(),
				gap_since = NULL, updated_at = now()
			WHERE user_id = $1
			RETURNING last_seq`, userID, seq).Scan(&last); err != nil {
			return err
		}
		// A lane that holds the user and gives it back as idle must not strand it.
		if _, err := tx.Exec(ctx, `INSERT INTO notify.wakes (user_id) VALUES ($1)`, userID); err != nil {
			return err
		}
		return audit(ctx, tx)
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// Gap is a user whose next SMS has not arrived while later ones wait in the inbox.
type Gap struct {
	UserID      int64     `json:"user_id"`
	LastSeq     int64     `json:"last_seq"`
	MissingSeq  int64     `json:"missing_seq"`
	WaitingSeqs int64     `json:"waiting"` // SMS in the inbox behind the gap
	Since       time.Time `json:"since"`
	// Alert is set once the gap is older than the alert threshold: an operator should look
	// (the skip action is the only way past a seq that is truly lost).
	Alert bool `json:"alert"`
}

// Baseline is where a user started because the consumer group started from the end of
// the topic: SMS before Seq were never received and are not sent.
type Baseline struct {
	UserID int64     `json:"user_id"`
	Seq    int64     `json:"baseline_seq"`
	At     time.Time `json:"at"`
}

// LaneView is what the lanes hold, as the gate view and metrics show it.
type LaneView struct {
	Pending        int64      `json:"pending"`         // SMS in the inbox
	Due            int64      `json:"due_users"`       // users a lane should take now
	Gaps           []Gap      `json:"gaps"`            // longest first, at most the limit
	GapAlerts      int64      `json:"gap_alerts"`      // users held by a gap older than the threshold
	OldestGap      float64    `json:"oldest_gap_s"`    // seconds
	Baselines      []Baseline `json:"baselines"`       // newest first, at most the limit
	DLQUnpublished int64      `json:"dlq_unpublished"` // dead letters not yet in the DLQ topic
}

// View reads what the lanes hold: counts, the gaps (longest first) and the baselines (newest
// first), at most limit of each; a gap older than alertAfter is an alert.
func (s *Store) View(ctx context.Context, limit int, alertAfter time.Duration) (LaneView, error) {
	var v LaneView
	err := s.db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM notify.notifications WHERE status = 'pending'),
			(SELECT count(*) FROM notify.progress p WHERE p.due_at <= now()
				OR (p.due_at IS NULL AND EXISTS (SELECT 1 FROM notify.wakes w WHERE w.user_id = p.user_id))),
			(SELECT count(*) FROM notify.progress WHERE gap_since < now() - $1::bigint * interval '1 microsecond'),
			COALESCE((SELECT extract(epoch FROM now() - min(gap_since)) FROM notify.progress WHERE gap_since IS NOT NULL), 0)::float8,
			(SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered' AND dlq_published_at IS NULL)
			  + (SELECT count(*) FROM notify.bad_messages WHERE dlq_published_at IS NULL)`,
		alertAfter.Microseconds()).Scan(&v.Pending, &v.Due, &v.GapAlerts, &v.OldestGap, &v.DLQUnpublished)
	if err != nil {
		return LaneView{}, fmt.Errorf("lane view: %w", err)
	}
	if limit <= 0 {
		return v, nil
	}
	rows, err := s.db.Query(ctx, `
		SELECT p.user_id, p.last_seq, p.last_seq + 1,
			(SELECT count(*) FROM notify.notifications n WHERE n.user_id = p.user_id AND n.seq > p.last_seq AND n.status = 'pending'),
			p.gap_since, p.gap_since < now() - $2::bigint * interval '1 microsecond'
		FROM notify.progress p WHERE p.gap_since IS NOT NULL
		ORDER BY p.gap_since, p.user_id LIMIT $1`, limit, alertAfter.Microseconds())
	if err != nil {
		return LaneView{}, fmt.Errorf("lane view: gaps: %w", err)
	}
	if v.Gaps, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Gap]); err != nil {
		return LaneView{}, fmt.Errorf("lane view: gaps: %w", err)
	}
	rows, err = s.db.Query(ctx, `SELECT user_id, baseline_seq, baseline_at FROM notify.progress
		WHERE baseline_seq IS NOT NULL ORDER BY baseline_at DESC, user_id LIMIT $1`, limit)
	if err != nil {
		return LaneView{}, fmt.Errorf("lane view: baselines: %w", err)
	}
	if v.Baselines, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Baseline]); err != nil {
		return LaneView{}, fmt.Errorf("lane view: baselines: %w", err)
	}
	v.Gaps, v.Baselines = nonNil(v.Gaps), nonNil(v.Baselines)
	return v, nil
}

// deployment caches the id of the deployment the notifier's tables belong to.
type deployment struct {
	mu sync.Mutex
	id string
}

// deploymentID returns the id notify.deployment holds (created once, by the migration that
// made the table), read once and then kept: it is part of every provider key.
func (s *Store) deploymentID(ctx context.Context) (string, error) {
	s.deployment.mu.Lock()
	defer s.deployment.mu.Unlock()
	if s.deployment.id != "" {
		return s.deployment.id, nil
	}
	if err := s.db.QueryRow(ctx, `SELECT id::text FROM notify.deployment`).Scan(&s.deployment.id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return s.deployment.id, nil
}

// refusedData reports whether the database refused a statement for the data of its rows: a
// data exception (SQLSTATE class 22: text that is not UTF-8 or holds a NUL, a value out of
// range) or an integrity constraint violation (class 23). Such a statement fails the same
// way however often it is tried.
func refusedData(err error) bool {
	code := pg.Code(err)
	return code != "" && (pgerrcode.IsDataException(code) || pgerrcode.IsIntegrityConstraintViolation(code))
}

// recordRetryable reports whether a failed record may succeed if tried again: not when its
// context was cancelled or the pool is closed (both will fail again at once), nor when the
// database refused its data. A timeout, a lost connection, a deadlock may pass.
func recordRetryable(err error) bool {
	return !errors.Is(err, context.Canceled) && !errors.Is(err, puddle.ErrClosedPool) && !refusedData(err)
}

// maxReason is how many characters of a failure reason the notifier's tables keep.
const maxReason = 1000
