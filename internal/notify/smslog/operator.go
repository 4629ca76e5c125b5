// What an operator reads: dead letters, bad messages, the audit trail, the DLQ depth.

package smslog

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/dead_letters.sql
	deadLettersSQL string
	//go:embed sql/bad_messages.sql
	badMessagesSQL string
	//go:embed sql/audit.sql
	auditSQL string
	//go:embed sql/dlq_depth.sql
	dlqDepthSQL string
)

// DeadLetter is one SMS that was dead-lettered.
type DeadLetter struct {
	UserID         int64     `json:"user_id"`
	Seq            int64     `json:"seq"`
	Kind           string    `json:"kind"`
	Text           string    `json:"text"`
	Attempts       int       `json:"attempts"`
	LastError      string    `json:"last_error"`
	MsgID          string    `json:"msg_id,omitempty"`
	DeadLetteredAt time.Time `json:"dead_lettered_at"`
	ReplayCount    int       `json:"replay_count"`
}

// DeadLetterPage is a page of dead letters, newest first.
type DeadLetterPage struct {
	Items      []DeadLetter `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// DeadLetters lists dead-lettered SMS newest first, by (finished_at, user_id, seq)
// descending; the lanes set finished_at when they dead-letter. It returns an
// apperr.Invalid error for a bad limit or cursor.
func (s *Store) DeadLetters(ctx context.Context, limit int, cursor string) (DeadLetterPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return DeadLetterPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return DeadLetterPage{}, err
	}
	rows, err := s.db.Query(ctx, deadLettersSQL, pg.Args{
		"before_at": c.timeOr(pgtype.Infinity), "before_user": c.U, "before_seq": c.S, "limit": limit + 1, "replay": deadletters.ActionReplay,
	})
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		var event []byte
		err := r.Scan(&d.UserID, &d.Seq, &d.Kind, &d.Text, &event, &d.Attempts, &d.LastError, &d.MsgID, &d.DeadLetteredAt, &d.ReplayCount)
		d.Kind, d.Text = fillFromEvent(d.Kind, d.Text, event)
		return d, err
	})
	if err != nil {
		return DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	page := DeadLetterPage{Items: nonNil(items)}
	if len(items) > limit {
		last := items[limit-1]
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{T: last.DeadLetteredAt.UnixMicro(), HasT: true, U: last.UserID, S: last.Seq})
	}
	return page, nil
}

// BadMessage is a broker message the notifier could not decode.
type BadMessage struct {
	MsgID       string    `json:"msg_id"`
	Queue       string    `json:"queue"`
	QueueOffset int64     `json:"queue_offset"`
	Body        string    `json:"body,omitempty"`        // when valid UTF-8
	BodyBase64  string    `json:"body_base64,omitempty"` // otherwise
	Reason      string    `json:"reason"`
	ReceivedAt  time.Time `json:"received_at"`
}

// BadMessagePage is a page of undecodable messages, newest first.
type BadMessagePage struct {
	Items      []BadMessage `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// BadMessages lists undecodable messages newest first, by (received_at, msg_id) descending.
// It returns an apperr.Invalid error for a bad limit or cursor.
func (s *Store) BadMessages(ctx context.Context, limit int, cursor string) (BadMessagePage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return BadMessagePage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return BadMessagePage{}, err
	}
	rows, err := s.db.Query(ctx, badMessagesSQL, pg.Args{"before_at": c.timeOr(pgtype.Infinity), "before_msg_id": c.M, "limit": limit + 1})
	if err != nil {
		return BadMessagePage{}, fmt.Errorf("list bad messages: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BadMessage, error) {
		var b BadMessage
		var body []byte
		err := r.Scan(&b.MsgID, &b.Queue, &b.QueueOffset, &body, &b.Reason, &b.ReceivedAt)
		if utf8.Valid(body) {
			b.Body = string(body)
		} else {
			b.BodyBase64 = base64.StdEncoding.EncodeToString(body)
		}
		return b, err
	})
	if err != nil {
		return BadMessagePage{}, fmt.Errorf("list bad messages: %w", err)
	}
	page := BadMessagePage{Items: nonNil(items)}
	if len(items) > limit {
		last := items[limit-1]
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{T: last.ReceivedAt.UnixMicro(), HasT: true, M: last.MsgID})
	}
	return page, nil
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

// AuditPage is a page of operator actions, newest first.
type AuditPage struct {
	Items      []AuditEntry `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Audit returns the operator actions before cursor ("": the latest), newest first. It
// returns an apperr.Invalid error for a bad limit or cursor.
func (s *Store) Audit(ctx context.Context, limit int, cursor string) (AuditPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return AuditPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return AuditPage{}, err
	}
	before := int64(math.MaxInt64)
	if cursor != "" {
		before = c.S
	}
	rows, err := s.db.Query(ctx, auditSQL, pg.Args{"before_id": before, "limit": limit + 1})
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit: %w", err)
	}
	items, err := pgx.AppendRows([]AuditEntry{}, rows, pgx.RowToStructByPos[AuditEntry])
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit: %w", err)
	}
	page := AuditPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{S: items[limit-1].ID})
	}
	return page, nil
}

// DLQDepth counts the dead letters no operator has replayed yet.
func (s *Store) DLQDepth(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, dlqDepthSQL, pg.Args{"replay": deadletters.ActionReplay}).Scan(&n); err != nil {
		return 0, fmt.Errorf("dlq depth: %w", err)
	}
	return n, nil
}
