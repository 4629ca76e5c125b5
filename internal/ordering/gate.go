package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// Verdict is what the gate decided for one message.
type Verdict string

// The verdicts.
const (
	Sent         Verdict = "sent"          // delivered now, recorded, user advanced
	Duplicate    Verdict = "duplicate"     // seq already finished: acknowledged, nothing sent
	Waiting      Verdict = "waiting"       // a predecessor is missing: the queue waits a moment
	Parked       Verdict = "parked"        // still missing after ParkAfter: kept in Postgres, acknowledged
	Retrying     Verdict = "retrying"      // delivery failed with attempts left (or the database did)
	DeadLettered Verdict = "dead_lettered" // attempts exhausted or permanent: recorded, then to the DLQ
)

// GateItem is one (user, seq) message as the gate sees it.
type GateItem struct {
	UserID int64
	Seq    int64
	MsgID  string
	Event  []byte // the message body (JSON), kept for replays
	Kind   string
	Text   string
}

// DeliverFunc performs the side effect of an admitted item inside tx, the transaction that
// also records the item as sent and advances the user. An error rolls it all back.
type DeliverFunc func(ctx context.Context, tx pgx.Tx) error

// Decision is the gate's verdict plus what the orderly consumer must return.
type Decision struct {
	Verdict  Verdict
	Attempts int
	Result   Result
	Err      error // the delivery or database error behind Retrying/DeadLettered, if any
}

// GateConfig configures a Gate.
type GateConfig struct {
	// MaxAttempts is how many deliveries of one (user, seq) are tried before it is
	// dead-lettered (default 3).
	MaxAttempts int
	// RetryBase and RetryMax bound the backoff between failed attempts (100ms, 5s).
	RetryBase, RetryMax time.Duration
	// WaitBase and WaitMax bound the backoff while a predecessor is missing (50ms, 2s).
	WaitBase, WaitMax time.Duration
	// ParkAfter is how long a message waits for a missing predecessor before it is parked in
	// Postgres and acknowledged, so its queue moves on (default 1s). Waiting alone cannot
	// work when the predecessor sits behind it on the same queue.
	ParkAfter time.Duration
	// IsPermanent reports whether a delivery error cannot be fixed by retrying (dead-letter
	// at once). Default: never.
	IsPermanent func(error) bool
	Logger      *slog.Logger
}

// GateStats counts the gate's decisions since start.
type GateStats struct {
	Sent, Duplicate, Waiting, Parked, Retrying, DeadLettered int64
}

// Gate enforces per-user order and exactly-once delivery in Postgres (DESIGN invariant 6):
// it delivers (user, seq) only after (user, seq-1) is finished (sent, dead-lettered or skipped
// by an operator), records (user, seq) in the same transaction as it advances the user, and
// acknowledges a redelivered (user, seq ≤ progress) without delivering. Attempts are counted
// in Postgres; when they run out the item is recorded dead-lettered, the user advances, and
// the message goes to the DLQ (invariant 7), so the user's next message proceeds.
//
// A message that arrives ahead of a missing predecessor waits a moment (the predecessor may be
// on another queue, e.g. after the topic's queue count changed), then is parked: kept in
// Postgres and acknowledged, so the queue moves on; ParkedReady hands it back once its
// predecessor is finished. Parking a failing user's messages too would slot in at the
// Retrying verdict.
type Gate struct {
	pool *pgxpool.Pool
	cfg  GateConfig
	log  *slog.Logger

	sent, dup, waiting, parked, retrying, dead atomic.Int64
}

// NewGate returns a gate over the notify schema's progress and notifications tables.
func NewGate(pool *pgxpool.Pool, cfg GateConfig) *Gate {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 100 * time.Millisecond
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = max(5*time.Second, cfg.RetryBase)
	}
	if cfg.WaitBase <= 0 {
		cfg.WaitBase = 50 * time.Millisecond
	}
	if cfg.WaitMax < cfg.WaitBase {
		cfg.WaitMax = max(2*time.Second, cfg.WaitBase)
	}
	if cfg.ParkAfter <= 0 {
		cfg.ParkAfter = time.Second
	}
	if cfg.IsPermanent == nil {
		cfg.IsPermanent = func(error) bool { return false }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Gate{pool: pool, cfg: cfg, log: cfg.Logger.With("component", "gate")}
}

// MaxAttempts returns the configured attempt limit.
func (g *Gate) MaxAttempts() int { return g.cfg.MaxAttempts }

// Stats returns the decision counters.
func (g *Gate) Stats() GateStats {
	return GateStats{Sent: g.sent.Load(), Duplicate: g.dup.Load(), Waiting: g.waiting.Load(), Parked: g.parked.Load(),
		Retrying: g.retrying.Load(), DeadLettered: g.dead.Load()}
}

var errAlreadyDone = errors.New("gate: already finished by another consumer")

type deliverError struct{ err error }

func (e *deliverError) Error() string { return e.err.Error() }
func (e *deliverError) Unwrap() error { return e.err }

// admission is what the first transaction found.
type admission struct {
	verdict  Verdict // Sent means "deliver now"
	attempts int
	waited   time.Duration
	deadOld  bool // a duplicate of a dead-lettered item
}

// Handle decides and performs one item. It never returns a result that skips the message.
func (g *Gate) Handle(ctx context.Context, it GateItem, deliver DeliverFunc) Decision {
	var adm admission
	err := pg.WithTx(ctx, g.pool, func(tx pgx.Tx) error {
		var err error
		adm, err = g.admit(ctx, tx, it)
		return err
	})
	if err != nil {
		return g.retry(it, 1, fmt.Errorf("gate: admitting %d:%d: %w", it.UserID, it.Seq, err))
	}
	switch adm.verdict {
	case Duplicate:
		g.dup.Add(1)
		if adm.deadOld {
			// Its first trip to the DLQ may not have happened (send-back failed and the
			// message came back): send it again; the DLQ may hold it twice, never zero times.
			return Decision{Verdict: Duplicate, Result: DeadLetter()}
		}
		return Decision{Verdict: Duplicate, Result: Ack()}
	case Waiting:
		g.waiting.Add(1)
		return Decision{Verdict: Waiting, Result: Wait(min(backoff(g.cfg.WaitBase, g.cfg.WaitMax, adm.waited), g.cfg.ParkAfter))}
	case Parked:
		g.parked.Add(1)
		return Decision{Verdict: Parked, Result: Ack()}
	case DeadLettered:
		g.dead.Add(1)
		return Decision{Verdict: DeadLettered, Attempts: adm.attempts, Result: DeadLetter()}
	}

	err = pg.WithTx(ctx, g.pool, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = $1 FOR UPDATE`, it.UserID).Scan(&last); err != nil {
			return err
		}
		if last >= it.Seq {
			return errAlreadyDone
		}
		if last != it.Seq-1 {
			return fmt.Errorf("gate: progress of user %d moved to %d under us", it.UserID, last)
		}
		if err := deliver(ctx, tx); err != nil {
			return &deliverError{err}
		}
		if _, err := tx.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', finished_at = now(), updated_at = now(),
			last_error = NULL, msg_id = $3, text = $4 WHERE user_id = $1 AND seq = $2`, it.UserID, it.Seq, it.MsgID, it.Text); err != nil {
			return err
		}
		return advance(ctx, tx, it.UserID, it.Seq)
	})
	var de *deliverError
	switch {
	case err == nil:
		g.sent.Add(1)
		return Decision{Verdict: Sent, Attempts: adm.attempts, Result: Ack()}
	case errors.Is(err, errAlreadyDone):
		g.dup.Add(1)
		return Decision{Verdict: Duplicate, Attempts: adm.attempts, Result: Ack()}
	case errors.As(err, &de):
		return g.failed(ctx, it, adm.attempts, de.err)
	default:
		return g.retry(it, adm.attempts, fmt.Errorf("gate: recording %d:%d: %w", it.UserID, it.Seq, err))
	}
}

// admit locks the user's progress and decides; for the next seq it counts the attempt
// (committed before delivery, so a crash mid-delivery still counts).
func (g *Gate) admit(ctx context.Context, tx pgx.Tx, it GateItem) (admission, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO notify.progress (user_id) VALUES ($1) ON CONFLICT DO NOTHING`, it.UserID); err != nil {
		return admission{}, err
	}
	var (
		last         int64
		waitingSeq   *int64
		waitingSince *time.Time
	)
	if err := tx.QueryRow(ctx, `SELECT last_seq, waiting_seq, waiting_since FROM notify.progress WHERE user_id = $1 FOR UPDATE`,
		it.UserID).Scan(&last, &waitingSeq, &waitingSince); err != nil {
		return admission{}, err
	}
	switch {
	case it.Seq <= last:
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2`, it.UserID, it.Seq).Scan(&status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return admission{}, err
		}
		return admission{verdict: Duplicate, deadOld: status == "dead_lettered"}, nil
	case it.Seq > last+1:
		since := time.Now()
		if waitingSeq != nil && *waitingSeq == it.Seq && waitingSince != nil {
			since = *waitingSince
		} else if _, err := tx.Exec(ctx, `UPDATE notify.progress SET waiting_seq = $2, waiting_since = now() WHERE user_id = $1`, it.UserID, it.Seq); err != nil {
			return admission{}, err
		}
		waited := time.Since(since)
		if waited < g.cfg.ParkAfter {
			var parked bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM notify.notifications WHERE user_id = $1 AND seq = $2 AND status = 'parked')`,
				it.UserID, it.Seq).Scan(&parked); err != nil {
				return admission{}, err
			}
			if !parked {
				return admission{verdict: Waiting, waited: waited}, nil
			}
		}
		// Park it (a duplicate of a parked message parks nothing new).
		if _, err := tx.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text)
			VALUES ($1, $2, 'parked', $3, $4, $5, $6) ON CONFLICT (user_id, seq) DO NOTHING`,
			it.UserID, it.Seq, it.MsgID, jsonOrNull(it.Event), it.Kind, it.Text); err != nil {
			return admission{}, err
		}
		return admission{verdict: Parked}, nil
	}
	var attempts int
	err := tx.QueryRow(ctx, `INSERT INTO notify.notifications (user_id, seq, status, attempts, msg_id, event, kind, text)
		VALUES ($1, $2, 'pending', 1, $3, $4, $5, $6)
		ON CONFLICT (user_id, seq) DO UPDATE SET attempts = notify.notifications.attempts + 1, updated_at = now()
		RETURNING attempts`, it.UserID, it.Seq, it.MsgID, jsonOrNull(it.Event), it.Kind, it.Text).Scan(&attempts)
	if err != nil {
		return admission{}, err
	}
	if attempts > g.cfg.MaxAttempts {
		// An attempt ran out without being recorded (a crash mid-delivery).
		if err := deadLetter(ctx, tx, it, "attempts exhausted (the last one did not finish)"); err != nil {
			return admission{}, err
		}
		return admission{verdict: DeadLettered, attempts: attempts - 1}, nil
	}
	return admission{verdict: Sent, attempts: attempts}, nil
}

// failed records a failed delivery; it dead-letters when the error is permanent or the
// attempts are used up, and otherwise asks for a retry after a backoff.
func (g *Gate) failed(ctx context.Context, it GateItem, attempts int, cause error) Decision {
	permanent := g.cfg.IsPermanent(cause)
	final := permanent || attempts >= g.cfg.MaxAttempts
	err := pg.WithTx(ctx, g.pool, func(tx pgx.Tx) error {
		if !final {
			_, err := tx.Exec(ctx, `UPDATE notify.notifications SET last_error = $3, updated_at = now() WHERE user_id = $1 AND seq = $2`,
				it.UserID, it.Seq, truncate(cause.Error()))
			return err
		}
		var last int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = $1 FOR UPDATE`, it.UserID).Scan(&last); err != nil {
			return err
		}
		if last >= it.Seq {
			return errAlreadyDone
		}
		return deadLetter(ctx, tx, it, cause.Error())
	})
	switch {
	case errors.Is(err, errAlreadyDone):
		g.dup.Add(1)
		return Decision{Verdict: Duplicate, Attempts: attempts, Result: Ack()}
	case err != nil:
		return g.retry(it, attempts, errors.Join(cause, err))
	case final:
		g.dead.Add(1)
		g.log.Warn("dead-lettered", "user_id", it.UserID, "seq", it.Seq, "attempts", attempts, "permanent", permanent, "err", cause)
		return Decision{Verdict: DeadLettered, Attempts: attempts, Result: DeadLetter(), Err: cause}
	}
	return g.retry(it, attempts, cause)
}

func (g *Gate) retry(it GateItem, attempts int, cause error) Decision {
	g.retrying.Add(1)
	d := backoffN(g.cfg.RetryBase, g.cfg.RetryMax, attempts)
	g.log.Info("delivery will be retried", "user_id", it.UserID, "seq", it.Seq, "attempts", attempts, "in", d, "err", cause)
	// Wait, not RetryAfter: the attempts that count are in Postgres; the client's own
	// counter must never dead-letter a message the gate has not recorded.
	return Decision{Verdict: Retrying, Attempts: attempts, Result: Wait(d), Err: cause}
}

// deadLetter records (user, seq) dead-lettered and advances the user, in tx (whose progress
// row the caller has locked).
func deadLetter(ctx context.Context, tx pgx.Tx, it GateItem, reason string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status, attempts, msg_id, event, kind, text, last_error, finished_at)
		VALUES ($1, $2, 'dead_lettered', 0, $3, $4, $5, $6, $7, now())
		ON CONFLICT (user_id, seq) DO UPDATE SET status = 'dead_lettered', last_error = $7, finished_at = now(), updated_at = now()`,
		it.UserID, it.Seq, it.MsgID, jsonOrNull(it.Event), it.Kind, it.Text, truncate(reason)); err != nil {
		return err
	}
	return advance(ctx, tx, it.UserID, it.Seq)
}

// advance moves the user's progress to seq, then past any later seqs already finished (the
// DLQ reconciler can record those out of order), and clears a wait it resolved.
func advance(ctx context.Context, tx pgx.Tx, userID, seq int64) error {
	_, err := tx.Exec(ctx, `
		WITH RECURSIVE run(s) AS (
			SELECT $2::bigint
			UNION ALL
			SELECT n.seq FROM notify.notifications n JOIN run ON n.user_id = $1 AND n.seq = run.s + 1
			WHERE n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
		)
		UPDATE notify.progress p SET last_seq = (SELECT max(s) FROM run), updated_at = now(),
			waiting_seq = CASE WHEN p.waiting_seq <= (SELECT max(s) FROM run) + 1 THEN NULL ELSE p.waiting_seq END,
			waiting_since = CASE WHEN p.waiting_seq <= (SELECT max(s) FROM run) + 1 THEN NULL ELSE p.waiting_since END
		WHERE p.user_id = $1`, userID, seq)
	return err
}

// RecordDeadLetter makes sure (user, seq) found in the DLQ is recorded: the DLQ reconciler's
// half of invariant 7, for a message that reached the DLQ without the gate recording it. A
// finished item is left alone. It reports whether it recorded anything.
func (g *Gate) RecordDeadLetter(ctx context.Context, it GateItem, reason string) (bool, error) {
	recorded := false
	err := pg.WithTx(ctx, g.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO notify.progress (user_id) VALUES ($1) ON CONFLICT DO NOTHING`, it.UserID); err != nil {
			return err
		}
		var last int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = $1 FOR UPDATE`, it.UserID).Scan(&last); err != nil {
			return err
		}
		var status string
		err := tx.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2`, it.UserID, it.Seq).Scan(&status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if it.Seq <= last || (status != "" && status != "pending") {
			return nil
		}
		recorded = true
		if _, err := tx.Exec(ctx, `INSERT INTO notify.notifications (user_id, seq, status, attempts, msg_id, event, kind, text, last_error, finished_at)
			VALUES ($1, $2, 'dead_lettered', 0, $3, $4, $5, $6, $7, now())
			ON CONFLICT (user_id, seq) DO UPDATE SET status = 'dead_lettered', last_error = $7, finished_at = now(), updated_at = now()`,
			it.UserID, it.Seq, it.MsgID, jsonOrNull(it.Event), it.Kind, it.Text, truncate(reason)); err != nil {
			return err
		}
		if it.Seq == last+1 {
			return advance(ctx, tx, it.UserID, it.Seq)
		}
		return nil
	})
	return recorded, err
}

// backoff grows with how long we have waited: base doubling per elapsed base, capped.
func backoff(base, maxD, waited time.Duration) time.Duration {
	n := 0
	for d := base; d < waited && n < 30; d *= 2 {
		n++
	}
	return backoffN(base, maxD, n)
}

// backoffN is base·2^(n-1) capped at maxD, with ±20% jitter.
func backoffN(base, maxD time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	jitter := time.Duration(rand.Int64N(int64(d)/5 + 1))
	return d - d/10 + jitter
}

func truncate(s string) string {
	if len(s) > 1000 {
		return s[:1000]
	}
	return s
}

func jsonOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// WaitingUser is a user whose next message is held because a predecessor is missing.
type WaitingUser struct {
	UserID     int64     `json:"user_id"`
	LastSeq    int64     `json:"last_seq"`
	WaitingSeq int64     `json:"waiting_seq"`
	Since      time.Time `json:"since"`
}

// Waiting lists the users the gate is holding, longest wait first (at most limit).
func (g *Gate) Waiting(ctx context.Context, limit int) ([]WaitingUser, error) {
	rows, err := g.pool.Query(ctx, `SELECT user_id, last_seq, waiting_seq, waiting_since FROM notify.progress
		WHERE waiting_seq IS NOT NULL ORDER BY waiting_since, user_id LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[WaitingUser])
}

// ParkedReady returns parked items whose predecessor is finished (seq = last_seq + 1), at
// most limit, skipping those whose last failed attempt is more recent than the retry backoff.
// The caller hands each to Handle again with its delivery.
func (g *Gate) ParkedReady(ctx context.Context, limit int) ([]GateItem, error) {
	rows, err := g.pool.Query(ctx, `SELECT n.user_id, n.seq, COALESCE(n.msg_id, ''), COALESCE(n.event::text, ''), COALESCE(n.kind, ''), COALESCE(n.text, '')
		FROM notify.notifications n JOIN notify.progress p ON p.user_id = n.user_id AND n.seq = p.last_seq + 1
		WHERE n.status = 'parked' AND (n.attempts = 0 OR n.updated_at <= now() - make_interval(secs => $2 * least(n.attempts, 6)))
		ORDER BY n.user_id LIMIT $1`, limit, g.cfg.RetryBase.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (GateItem, error) {
		var it GateItem
		var event string
		err := row.Scan(&it.UserID, &it.Seq, &it.MsgID, &event, &it.Kind, &it.Text)
		it.Event = []byte(event)
		return it, err
	})
}

// ParkedCount returns how many items are parked.
func (g *Gate) ParkedCount(ctx context.Context) (int, error) {
	var n int
	err := g.pool.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE status = 'parked'`).Scan(&n)
	return n, err
}

// ErrNotHeld means an operator asked to skip a seq the gate is not waiting for: the user is
// not held by a missing predecessor, or the seq is not the one missing (last_seq + 1).
var ErrNotHeld = errors.New("gate: the user is not held by that missing seq")

// ErrNotLost means the seq an operator asked to skip has arrived (it is pending delivery,
// parked, or finished): it is not lost, so it must not be skipped.
var ErrNotLost = errors.New("gate: that seq has arrived; it is not lost")

// Skip records the missing seq of a held user as skipped_by_operator and advances the user
// past it (and past any finished successors), in one transaction with audit, which records
// who skipped it and why. seq must be last_seq + 1 of a user the gate is waiting on (else
// ErrNotHeld), and the message must never have arrived (else ErrNotLost). Parked successors
// are then delivered by the next drain. It returns the user's new progress.
func (g *Gate) Skip(ctx context.Context, userID, seq int64, reason string, audit func(ctx context.Context, tx pgx.Tx) error) (int64, error) {
	var last int64
	err := pg.WithTx(ctx, g.pool, func(tx pgx.Tx) error {
		var waitingSeq *int64
		err := tx.QueryRow(ctx, `SELECT last_seq, waiting_seq FROM notify.progress WHERE user_id = $1 FOR UPDATE`, userID).Scan(&last, &waitingSeq)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotHeld
		}
		if err != nil {
			return err
		}
		if waitingSeq == nil || seq != last+1 {
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
			VALUES ($1, $2, 'skipped_by_operator', $3, now())`, userID, seq, truncate("skipped by an operator: "+reason)); err != nil {
			return err
		}
		if err := advance(ctx, tx, userID, seq); err != nil {
			return err
		}
		if err := audit(ctx, tx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT last_seq FROM notify.progress WHERE user_id = $1`, userID).Scan(&last)
	})
	if err != nil {
		return 0, err
	}
	g.log.WarnContext(ctx, "missing seq skipped by an operator", "user_id", userID, "seq", seq, "last_seq", last)
	return last, nil
}

// HeadOfLine is what the gate holds: users waiting on a missing predecessor, how long the
// oldest has waited, and how many messages are parked.
type HeadOfLine struct {
	Waiting    int64
	OldestWait time.Duration
	Parked     int64
}

// HeadOfLine reads what the gate holds (for metrics: two index scans).
func (g *Gate) HeadOfLine(ctx context.Context) (HeadOfLine, error) {
	var h HeadOfLine
	var secs float64
	err := g.pool.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(waiting_since)), 0)::float8,
			(SELECT count(*) FROM notify.notifications WHERE status = 'parked')
		FROM notify.progress WHERE waiting_seq IS NOT NULL`).Scan(&h.Waiting, &secs, &h.Parked)
	h.OldestWait = time.Duration(max(secs, 0) * float64(time.Second))
	return h, err
}
