// What an operator reads: dead letters, bad messages, the audit trail, the DLQ depth.

package smslog

import (
	"context"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/dead_letters.sql
	deadLettersSQL string
	//go:embed sql/bad_messages.sql
	badMessagesSQL string
	//go:embed sql/bad_message.sql
	badMessageSQL string
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

// Bounds of the bad messages' list: a bad message's body is kept up to inbox.MaxBadBody
// bytes (64 KiB; rows an older release wrote may hold a whole broker message, up to 4 MiB),
// so a page of them carries an excerpt of each body and holds at most MaxBadMessagePage; GET
// /v1/bad-messages/{msg_id} (Store.BadMessage) has one whole. A page thus builds at most
// about MaxBadMessagePage × BadBodyExcerpt bytes of bodies (a few times that as JSON escapes
// or base64), whatever the bodies.
const (
	// MaxBadMessagePage is the most bad messages a page holds (its limit's bound).
	MaxBadMessagePage = 100
	// BadBodyExcerpt is how many bytes of each body a page carries, at most: the body's
	// start, cut in the database (substring) so that Postgres never sends the rest.
	BadBodyExcerpt = 4 << 10
)

// BadMessage is a broker message the notifier could not decode. In a page of them (Store.BadMessages)
// Body or BodyBase64 is an excerpt, the body's first BadBodyExcerpt bytes at most
// (BodyTruncated when cut); Store.BadMessage has the body whole.
type BadMessage struct {
	MsgID       string `json:"msg_id"`
	Queue       string `json:"queue"`
	QueueOffset int64  `json:"queue_offset"`
	Body        string `json:"body,omitempty"`        // when valid UTF-8
	BodyBase64  string `json:"body_base64,omitempty"` // otherwise
	// BodyBytes is the size of the body as stored, in bytes, whether or not Body holds all of
	// it. (The inbox keeps at most inbox.MaxBadBody bytes of a message: a longer one's stored
	// body ends with a marker giving the message's whole length.)
	BodyBytes int64 `json:"body_bytes"`
	// BodyTruncated says that Body (or BodyBase64) holds only the body's start: GET
	// /v1/bad-messages/{msg_id} has the whole of it.
	BodyTruncated bool      `json:"body_truncated"`
	Reason        string    `json:"reason"`
	ReceivedAt    time.Time `json:"received_at"`
}

// setBody sets b's body from raw, the start of a body of size bytes (all of it when as long).
// A body cut inside a UTF-8 character loses that character's first bytes from Body, so that
// a text body reads as text; one that is not UTF-8 goes as base64, every byte of raw.
func (b *BadMessage) setBody(raw []byte, size int64) {
	b.BodyBytes, b.BodyTruncated = size, int64(len(raw)) < size
	text := raw
	if b.BodyTruncated {
		text = withoutPartialRune(raw)
	}
	if utf8.Valid(text) {
		b.Body = string(text)
	} else {
		b.BodyBase64 = base64.StdEncoding.EncodeToString(raw)
	}
}

// withoutPartialRune returns b without the incomplete UTF-8 character it may end with.
func withoutPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// BadMessagePage is a page of undecodable messages, newest first.
type BadMessagePage struct {
	Items      []BadMessage `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// scanBadMessage reads a row of bad_messages.sql or bad_message.sql.
func scanBadMessage(r pgx.CollectableRow) (BadMessage, error) {
	var b BadMessage
	var body []byte
	var size int64
	if err := r.Scan(&b.MsgID, &b.Queue, &b.QueueOffset, &body, &size, &b.Reason, &b.ReceivedAt); err != nil {
		return b, err
	}
	b.setBody(body, size)
	return b, nil
}

// BadMessages lists undecodable messages newest first, by (received_at, msg_id) descending,
// at most MaxBadMessagePage a page, each with at most BadBodyExcerpt bytes of its body. It
// returns an apperr.Invalid error for a bad limit or cursor.
func (s *Store) BadMessages(ctx context.Context, limit int, cursor string) (BadMessagePage, error) {
	limit, err := checkLimitUpTo(limit, MaxBadMessagePage)
	if err != nil {
		return BadMessagePage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return BadMessagePage{}, err
	}
	rows, err := s.db.Query(ctx, badMessagesSQL, pg.Args{"before_at": c.timeOr(pgtype.Infinity), "before_msg_id": c.M, "limit": limit + 1,
		"excerpt": BadBodyExcerpt})
	if err != nil {
		return BadMessagePage{}, fmt.Errorf("list bad messages: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanBadMessage)
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

// MsgIDPattern is the form of a message id GET /v1/bad-messages/{msg_id} takes, as a regular
// expression: a RocketMQ message id is hex digits, and the list's cursor carries one in this
// form (CursorPattern).
const MsgIDPattern = `^[0-9A-Za-z_-]{1,128}$`

var msgIDRE = regexp.MustCompile(MsgIDPattern)

// BadMessage returns the bad message msgID (notify.bad_messages' primary key) with its body
// whole. It returns an apperr.Invalid error for an id not of MsgIDPattern's form, and
// apperr.NotFound for one the table does not hold (never recorded, or pruned).
func (s *Store) BadMessage(ctx context.Context, msgID string) (BadMessage, error) {
	if !msgIDRE.MatchString(msgID) {
		return BadMessage{}, apperr.New(apperr.Invalid, "msg_id must be 1 to 128 letters, digits, _ or -, got %q", freetext.Clip(msgID, 140))
	}
	rows, err := s.db.Query(ctx, badMessageSQL, pg.Args{"msg_id": msgID})
	if err != nil {
		return BadMessage{}, fmt.Errorf("get bad message: %w", err)
	}
	b, err := pgx.CollectExactlyOneRow(rows, scanBadMessage)
	if errors.Is(err, pgx.ErrNoRows) {
		return BadMessage{}, apperr.New(apperr.NotFound, "no bad message %q (never recorded, or pruned: RETENTION_BAD_MESSAGES)", msgID)
	}
	if err != nil {
		return BadMessage{}, fmt.Errorf("get bad message: %w", err)
	}
	return b, nil
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
