package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActionSkip is the audit action of an operator skipping a user's lost seq at the gate.
const ActionSkip = "skip_missing_seq"

// AuditTx returns a function that records an operator action in notify.audit in the caller's
// transaction (the gate's Skip takes one).
func (s *Store) AuditTx(actor, action string, userID, seq int64, reason string) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO notify.audit (actor, action, user_id, seq, reason) VALUES ($1, $2, $3, $4, $5)`,
			actor, action, userID, seq, reason)
		if err != nil {
			return fmt.Errorf("audit %s %d:%d: %w", action, userID, seq, err)
		}
		return nil
	}
}

// AuditEntry is one recorded operator action.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	UserID *int64    `json:"user_id"`
	Seq    *int64    `json:"seq"`
	Reason string    `json:"reason"`
}

// Audit returns the latest operator actions, newest first (at most limit; 0 means
// DefaultPageSize).
func (s *Store) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT id, at, actor, action, user_id, seq, reason FROM notify.audit ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// DLQDepth counts the dead letters no operator has replayed yet.
func (s *Store) DLQDepth(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM notify.notifications n
		WHERE n.status = 'dead_lettered'
		  AND NOT EXISTS (SELECT 1 FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = $1)`,
		ActionReplay).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("dlq depth: %w", err)
	}
	return n, nil
}

// ObservedSender passes every SMS to Inner and tells Observe how long the send took and
// whether it failed (metrics).
type ObservedSender struct {
	Inner   Sender
	Observe func(took time.Duration, err error)
}

// Journaled reports whether Inner is journaled.
func (o ObservedSender) Journaled() bool { return IsJournaled(o.Inner) }

// Send sends m through Inner, timing it.
func (o ObservedSender) Send(ctx context.Context, m SMS) error {
	start := time.Now()
	err := o.Inner.Send(ctx, m)
	if o.Observe != nil {
		o.Observe(time.Since(start), err)
	}
	return err
}
