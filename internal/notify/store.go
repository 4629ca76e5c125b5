package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// This file holds every SQL statement of the notify package.

// Notification statuses, as notify.notifications stores them.
const (
	StatusPending      = "pending"
	StatusSent         = "sent"
	StatusDeadLettered = "dead_lettered"
	StatusSkipped      = "skipped_by_operator"
)

// Pagination bounds of the list methods.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// FeedLag is how far behind the database clock the change feed's cursor stays. A lane's
// record stamps updated_at when its statement starts and becomes visible when it commits;
// rows younger than FeedLag are sent again on the next poll so that one committing late is
// not skipped. It must exceed the longest such statement by far (they take milliseconds; the
// provider is called before, never during, them).
const FeedLag = 10 * time.Second

// Store reads the notifier's tables for the API, the page and the CLI, and performs operator
// replays. It is safe for concurrent use.
type Store struct {
	db         *pgxpool.Pool
	deployment deployment
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// SMSItem is one user's SMS as the log shows it.
type SMSItem struct {
	Seq        int64      `json:"seq"`
	Kind       string     `json:"kind"`
	Text       string     `json:"text"`
	Status     string     `json:"status"`
	SentAt     *time.Time `json:"sent_at"` // null unless sent
	FinishedAt *time.Time `json:"finished_at"`
	Attempts   int        `json:"attempts"`
	LastError  string     `json:"last_error,omitempty"`
	// ReplayCount and ReplayedAt tell whether an operator re-sent a dead letter late.
	ReplayCount int        `json:"replay_count,omitempty"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
}

// UserSMS returns the finished SMS (sent, dead-lettered, skipped) of a user with seq >
// afterSeq, in seq order; pending ones are not in the log yet.
func (s *Store) UserSMS(ctx context.Context, userID, afterSeq int64) ([]SMSItem, error) {
	rows, err := s.db.Query(ctx, `
		SELECT n.user_id, n.seq, n.status, n.attempts, coalesce(n.last_error, ''), coalesce(n.kind, ''),
		       coalesce(n.text, ''), n.event, n.finished_at, r.n, r.last
		FROM notify.notifications n
		LEFT JOIN LATERAL (
			SELECT count(*)::int AS n, max(a.at) AS last FROM notify.audit a
			WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = $3
		) r ON true
		WHERE n.user_id = $1 AND n.seq > $2 AND n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
		ORDER BY n.seq`, userID, afterSeq, ActionReplay)
	if err != nil {
		return nil, fmt.Errorf("list SMS of user %d: %w", userID, err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SMSItem, error) {
		var it SMSItem
		var uid int64
		var event []byte
		var replayedAt *time.Time
		if err := r.Scan(&uid, &it.Seq, &it.Status, &it.Attempts, &it.LastError, &it.Kind, &it.Text, &event,
			&it.FinishedAt, &it.ReplayCount, &replayedAt); err != nil {
			return it, err
		}
		it.Kind, it.Text = fillFromEvent(it.Kind, it.Text, event)
		if it.Status == StatusSent {
			it.SentAt = it.FinishedAt
		}
		if it.ReplayCount > 0 {
			it.ReplayedAt = replayedAt
		}
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list SMS of user %d: %w", userID, err)
	}
	return items, nil
}

// fillFromEvent renders kind and text from the stored event when the inbox did not store
// them (it may record a failure before rendering).
func fillFromEvent(kind, text string, event []byte) (string, string) {
	if (kind != "" && text != "") || len(event) == 0 {
		return kind, text
	}
	var e walletevent.Event
	if err := json.Unmarshal(event, &e); err != nil {
		return kind, text
	}
	if kind == "" {
		kind = string(e.Kind)
	}
	if text == "" {
		if m, err := Render(e); err == nil {
			text = m.Text
		}
	}
	return kind, text
}

// UserSummary is one user known to the notifier, with counts of its SMS by status.
type UserSummary struct {
	UserID       int64 `json:"user_id"`
	Sent         int   `json:"sent"`
	DeadLettered int   `json:"dead_lettered"`
	Skipped      int   `json:"skipped_by_operator"`
	Pending      int   `json:"pending"`
	LastSeq      int64 `json:"last_seq"` // last finished seq (the user's progress)
	// MissingSeq is set while the user's next seq has not arrived but later ones wait in the
	// inbox (a gap), GapSince since when.
	MissingSeq *int64     `json:"missing_seq,omitempty"`
	GapSince   *time.Time `json:"gap_since,omitempty"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// UserPage is a page of users in user_id order.
type UserPage struct {
	Items      []UserSummary `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// Users lists the users that have notifications, by user id, limit per page. It returns an
// apperr.Invalid error for a bad limit or cursor.
func (s *Store) Users(ctx context.Context, limit int, cursor string) (UserPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return UserPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return UserPage{}, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT n.user_id,
		       count(*) FILTER (WHERE n.status = 'sent')::int,
		       count(*) FILTER (WHERE n.status = 'dead_lettered')::int,
		       count(*) FILTER (WHERE n.status = 'skipped_by_operator')::int,
		       count(*) FILTER (WHERE n.status = 'pending')::int,
		       coalesce(max(p.last_seq), 0), max(p.last_seq + 1) FILTER (WHERE p.gap_since IS NOT NULL),
		       max(p.gap_since), max(n.updated_at)
		FROM notify.notifications n
		LEFT JOIN notify.progress p ON p.user_id = n.user_id
		WHERE n.user_id > $1
		GROUP BY n.user_id
		ORDER BY n.user_id
		LIMIT $2`, c.U, limit+1)
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UserSummary, error) {
		var u UserSummary
		err := r.Scan(&u.UserID, &u.Sent, &u.DeadLettered, &u.Skipped, &u.Pending, &u.LastSeq, &u.MissingSeq, &u.GapSince, &u.UpdatedAt)
		return u, err
	})
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	page := UserPage{Items: nonNil(items)}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{U: items[limit-1].UserID})
	}
	return page, nil
}

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
	rows, err := s.db.Query(ctx, `
		SELECT n.user_id, n.seq, coalesce(n.kind, ''), coalesce(n.text, ''), n.event, n.attempts,
		       coalesce(n.last_error, ''), coalesce(n.msg_id, ''), n.finished_at,
		       (SELECT count(*)::int FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = $5)
		FROM notify.notifications n
		WHERE n.status = 'dead_lettered' AND (n.finished_at, n.user_id, n.seq) < ($1, $2, $3)
		ORDER BY n.finished_at DESC, n.user_id DESC, n.seq DESC
		LIMIT $4`, c.timeOr(pgtype.Infinity), c.U, c.S, limit+1, ActionReplay)
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
	rows, err := s.db.Query(ctx, `
		SELECT msg_id, queue, queue_offset, body, reason, received_at
		FROM notify.bad_messages
		WHERE (received_at, msg_id) < ($1, $2)
		ORDER BY received_at DESC, msg_id DESC
		LIMIT $3`, c.timeOr(pgtype.Infinity), c.M, limit+1)
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

// Change is a notification as the change feed carries it: any status, pending included (so a
// page can show retries as they happen).
type Change struct {
	UserID     int64      `json:"user_id"`
	Seq        int64      `json:"seq"`
	Kind       string     `json:"kind"`
	Text       string     `json:"text"`
	Status     string     `json:"status"`
	Attempts   int        `json:"attempts"`
	LastError  string     `json:"last_error,omitempty"`
	SentAt     *time.Time `json:"sent_at"`
	FinishedAt *time.Time `json:"finished_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// ChangePage is a page of the change feed and the cursor to poll with next.
type ChangePage struct {
	Items      []Change `json:"items"`
	NextCursor string   `json:"next_cursor"`
	// More is true when the page was full: poll again at once.
	More bool `json:"more"`
}

// Changes returns the notifications changed after cursor ("" = from the beginning) in
// (updated_at, user_id, seq) order. The returned cursor never passes now − FeedLag, so rows
// changed in the last FeedLag come again on the next poll: a reader must upsert by
// (user_id, seq). The inbox and the lanes set updated_at = now() whenever they change a row. It returns
// an apperr.Invalid error for a bad limit or cursor.
func (s *Store) Changes(ctx context.Context, limit int, cursor string) (ChangePage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return ChangePage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return ChangePage{}, err
	}
	rows, err := s.db.Query(ctx, `
		SELECT n.user_id, n.seq, coalesce(n.kind, ''), coalesce(n.text, ''), n.event, n.status, n.attempts,
		       coalesce(n.last_error, ''), n.finished_at, n.updated_at, statement_timestamp() - $5::bigint * interval '1 microsecond'
		FROM notify.notifications n
		WHERE (n.updated_at, n.user_id, n.seq) > ($1, $2, $3)
		ORDER BY n.updated_at, n.user_id, n.seq
		LIMIT $4`, c.timeOr(pgtype.NegativeInfinity), c.U, c.S, limit, FeedLag.Microseconds())
	if err != nil {
		return ChangePage{}, fmt.Errorf("list SMS changes: %w", err)
	}
	var horizon time.Time
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Change, error) {
		var ch Change
		var event []byte
		err := r.Scan(&ch.UserID, &ch.Seq, &ch.Kind, &ch.Text, &event, &ch.Status, &ch.Attempts, &ch.LastError,
			&ch.FinishedAt, &ch.UpdatedAt, &horizon)
		ch.Kind, ch.Text = fillFromEvent(ch.Kind, ch.Text, event)
		if ch.Status == StatusSent {
			ch.SentAt = ch.FinishedAt
		}
		return ch, err
	})
	if err != nil {
		return ChangePage{}, fmt.Errorf("list SMS changes: %w", err)
	}
	page := ChangePage{Items: nonNil(items), NextCursor: cursor, More: len(items) == limit}
	// Advance past the last row old enough that no transaction still in flight can commit
	// a row before it.
	for i := len(items) - 1; i >= 0; i-- {
		if !items[i].UpdatedAt.After(horizon) {
			page.NextCursor = encodeCursor(cursorKey{T: items[i].UpdatedAt.UnixMicro(), HasT: true, U: items[i].UserID, S: items[i].Seq})
			break
		}
	}
	return page, nil
}

// ActionReplay is the audit action of an operator replay of a dead letter.
const ActionReplay = "replay_dead_letter"

// ReplayResult is what an operator replay sent.
type ReplayResult struct {
	UserID         int64  `json:"user_id"`
	Seq            int64  `json:"seq"`
	Replay         int    `json:"replay"` // 1 for the first replay of this (user, seq)
	IdempotencyKey string `json:"idempotency_key"`
	Text           string `json:"text"`
	// AlreadyDelivered is set when the provider had the SMS already under its key (it was
	// delivered after all, or by an earlier replay): nothing new was delivered.
	AlreadyDelivered bool      `json:"already_delivered"`
	ReplayedAt       time.Time `json:"replayed_at"`
}

// Replay re-sends the dead-lettered SMS (userID, seq) through sender, marked late (see
// MarkLate) under its own provider key (ProviderKey, as the lanes sent it), rendered from the
// stored event, and records an audit row (actor, ActionReplay, reason); with a journaled
// sender (the log sender) the late SMS log row is written with the audit row. A provider
// that had the SMS already says so (ErrAlreadyDelivered): the replay is recorded with
// AlreadyDelivered and nothing is delivered twice. The notification keeps its
// dead_lettered status.
//
// The provider is called with no transaction open and no row locked: the replay claims the
// dead letter by reading it with the number of replays recorded so far, its fence; sends;
// and records only if that number has not changed meanwhile. Of two replays of one SMS at
// once, the one that records first is the one recorded; the other is refused (its send
// reached the provider under the same key, which delivers it once). A send that fails
// records nothing.
//
// Errors: apperr.NotFound (no such SMS), apperr.Conflict (it is not dead-lettered, or
// another replay of it was recorded meanwhile), apperr.Unprocessable (no usable stored
// event, or the provider refused it for good), apperr.Unavailable (the send failed and may
// be retried).
func (s *Store) Replay(ctx context.Context, sender Sender, actor string, userID, seq int64, reason string) (ReplayResult, error) {
	var status string
	var event []byte
	var fence int
	var journaled bool
	err := s.db.QueryRow(ctx, `
		SELECT n.status, n.event,
		       (SELECT count(*)::int FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = $3),
		       EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = n.user_id AND l.seq = n.seq AND l.late)
		FROM notify.notifications n
		WHERE n.user_id = $1 AND n.seq = $2`, userID, seq, ActionReplay).Scan(&status, &event, &fence, &journaled)
	if errors.Is(err, pgx.ErrNoRows) {
		return ReplayResult{}, apperr.New(apperr.NotFound, "no dead letter for user %d seq %d", userID, seq)
	}
	if err != nil {
		return ReplayResult{}, fmt.Errorf("read the dead letter of user %d seq %d: %w", userID, seq, err)
	}
	if status != StatusDeadLettered {
		return ReplayResult{}, apperr.New(apperr.Conflict, "the SMS for user %d seq %d is %s, not dead_lettered: only dead letters can be replayed", userID, seq, status)
	}
	m, err := renderStored(userID, seq, event)
	if err != nil {
		return ReplayResult{}, err
	}
	dep, err := s.deploymentID(ctx)
	if err != nil {
		return ReplayResult{}, err
	}
	m.IdempotencyKey = ProviderKey(dep, userID, seq)
	m = MarkLate(m)
	res := ReplayResult{UserID: userID, Seq: seq, Replay: fence + 1, IdempotencyKey: m.IdempotencyKey, Text: m.Text}
	journal := IsJournaled(sender)
	// A journaled sender's delivery is its SMS log row: one there already is the SMS
	// delivered late before.
	res.AlreadyDelivered = journal && journaled
	if !res.AlreadyDelivered {
		err := sender.Send(ctx, m)
		switch {
		case errors.Is(err, ErrAlreadyDelivered):
			res.AlreadyDelivered = true
		case errors.Is(err, ErrPermanent):
			return ReplayResult{}, apperr.Wrap(err, apperr.Unprocessable, "the SMS provider refused the replay of user %d seq %d", userID, seq)
		case err != nil:
			return ReplayResult{}, apperr.Wrap(err, apperr.Unavailable, "sending the replay of user %d seq %d failed; try again", userID, seq)
		}
	}
	err = pg.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		var now int
		if err := tx.QueryRow(ctx, `
			SELECT (SELECT count(*)::int FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = $3)
			FROM notify.notifications n
			WHERE n.user_id = $1 AND n.seq = $2
			FOR UPDATE`, userID, seq, ActionReplay).Scan(&now); err != nil {
			return fmt.Errorf("lock the dead letter of user %d seq %d: %w", userID, seq, err)
		}
		if now != fence {
			return apperr.New(apperr.Conflict, "another replay of user %d seq %d was recorded while this one was sent (replay %d); the provider delivers it once under its key",
				userID, seq, now)
		}
		if journal && !res.AlreadyDelivered {
			inserted, err := insertSMSLog(ctx, tx, m)
			if err != nil {
				return fmt.Errorf("log the replay of user %d seq %d: %w", userID, seq, err)
			}
			res.AlreadyDelivered = !inserted
		}
		detail, err := json.Marshal(map[string]any{"replay": res.Replay, "idempotency_key": m.IdempotencyKey, "text": m.Text,
			"already_delivered": res.AlreadyDelivered})
		if err != nil {
			return fmt.Errorf("encode audit detail: %w", err)
		}
		return tx.QueryRow(ctx, `
			INSERT INTO notify.audit (actor, action, user_id, seq, reason, detail)
			VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING at`, actor, ActionReplay, userID, seq, reason, detail).Scan(&res.ReplayedAt)
	})
	if err != nil {
		return ReplayResult{}, err
	}
	return res, nil
}

// renderStored renders the event the inbox stored for (userID, seq).
func renderStored(userID, seq int64, event []byte) (SMS, error) {
	if len(event) == 0 {
		return SMS{}, apperr.New(apperr.Unprocessable, "user %d seq %d has no stored event to render the SMS from", userID, seq)
	}
	var e walletevent.Event
	if err := json.Unmarshal(event, &e); err != nil {
		return SMS{}, apperr.Wrap(err, apperr.Unprocessable, "the stored event of user %d seq %d is not a wallet event", userID, seq)
	}
	if e.UserID != userID || e.Seq != seq {
		return SMS{}, apperr.New(apperr.Unprocessable, "the stored event of user %d seq %d is for user %d seq %d", userID, seq, e.UserID, e.Seq)
	}
	m, err := Render(e)
	if err != nil {
		return SMS{}, apperr.Wrap(err, apperr.Unprocessable, "cannot render the SMS of user %d seq %d from its stored event", userID, seq)
	}
	return m, nil
}

// insertSMSLog logs the late replay m in tx, once per (user, seq). It reports whether a row
// was inserted.
func insertSMSLog(ctx context.Context, tx pgx.Tx, m SMS) (bool, error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO notify.sms_log (user_id, seq, phone, text, late)
		VALUES ($1, $2, $3, $4, true)
		ON CONFLICT (user_id, seq) WHERE late DO NOTHING`, m.UserID, m.Seq, m.Phone, m.Text)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// --- pagination ---

func checkLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageSize, nil
	}
	if limit < 0 || limit > MaxPageSize {
		return 0, apperr.New(apperr.Invalid, "limit must be between 1 and %d, got %d", MaxPageSize, limit)
	}
	return limit, nil
}

// cursorKey is the position after which (or before which, for newest-first lists) a page
// starts.
type cursorKey struct {
	T    int64 // unix microseconds (Postgres precision)
	HasT bool
	U    int64
	S    int64
	M    string // a RocketMQ message id: hex digits
}

// CursorPattern is the form of every cursor the lists return, as a regular expression (the
// OpenAPI document states it): "<t>.<u>.<s>.<m>", t the position's time in unix
// microseconds (empty when the list has none), u a user id, s a seq, m a message id. A
// cursor is a position in the list's order, so any text of this form is one: a client that
// makes one up starts from where it says.
const CursorPattern = `^(?:[0-9]{0,18}\.[0-9]{1,18}\.[0-9]{1,18}\.[0-9A-Za-z_-]{0,128})?$`

var cursorRE = regexp.MustCompile(CursorPattern)

// timeOr returns the cursor's time, or the given infinity for an empty cursor.
func (c cursorKey) timeOr(inf pgtype.InfinityModifier) pgtype.Timestamptz {
	if !c.HasT {
		return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
	}
	return pgtype.Timestamptz{Time: time.UnixMicro(c.T), Valid: true}
}

func encodeCursor(c cursorKey) string {
	t := ""
	if c.HasT {
		t = strconv.FormatInt(c.T, 10)
	}
	return t + "." + strconv.FormatInt(c.U, 10) + "." + strconv.FormatInt(c.S, 10) + "." + c.M
}

func decodeCursor(s string) (cursorKey, error) {
	var c cursorKey
	if s == "" {
		return c, nil
	}
	if !cursorRE.MatchString(s) {
		return cursorKey{}, apperr.New(apperr.Invalid, "cursor %q is not one this API returned (the next_cursor of a page)", s)
	}
	parts := strings.Split(s, ".")
	// The pattern allows at most 18 digits per number: each fits an int64.
	if parts[0] != "" {
		c.T, _ = strconv.ParseInt(parts[0], 10, 64)
		c.HasT = true
	}
	c.U, _ = strconv.ParseInt(parts[1], 10, 64)
	c.S, _ = strconv.ParseInt(parts[2], 10, 64)
	c.M = parts[3]
	return c, nil
}

// nonNil returns s, or an empty slice for nil, so that an empty page is "items": [] in JSON.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
