// Package smslog is the SMS log as people read it: each user's SMS in order, the users, the
// dead letters, the bad messages, the change feed the page polls, the operators' audit trail
// and the CLI's printout. It reads the notifier's tables (the gate's, the inbox's, the dead
// letters') with statements of its own, read-only, and writes none: the read side of the
// notifier, one place to look when a table changes besides its owner.
package smslog

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/redact"
	"github.com/walletsaga/walletsaga/internal/walletevent"
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

var (
	//go:embed sql/user_sms.sql
	userSMSSQL string
	//go:embed sql/users.sql
	usersSQL string
	//go:embed sql/user_ids.sql
	userIDsSQL string
	//go:embed sql/user_ids_by_phone.sql
	userIDsByPhoneSQL string
	//go:embed sql/activity.sql
	activitySQL string
	//go:embed sql/dead_letters.sql
	deadLettersSQL string
	//go:embed sql/bad_messages.sql
	badMessagesSQL string
	//go:embed sql/changes.sql
	changesSQL string
	//go:embed sql/audit.sql
	auditSQL string
	//go:embed sql/dlq_depth.sql
	dlqDepthSQL string
)

// Store reads the notifier's tables for the API, the page, the CLI and the metrics. It
// writes nothing. It is safe for concurrent use.
type Store struct {
	db *pgxpool.Pool
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

// UserSMS returns all the finished SMS (sent, dead-lettered, skipped) of a user with seq >
// afterSeq, in seq order, reading them a page at a time; pending ones are not in the log
// yet. It is the CLI's; the API serves UserSMSPage.
func (s *Store) UserSMS(ctx context.Context, userID, afterSeq int64) ([]SMSItem, error) {
	var all []SMSItem
	for {
		items, err := s.userSMS(ctx, userID, afterSeq, MaxPageSize)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if len(items) < MaxPageSize {
			return all, nil
		}
		afterSeq = items[len(items)-1].Seq
	}
}

// SMSPage is a page of one user's finished SMS, in seq order.
type SMSPage struct {
	UserID     int64     `json:"user_id"`
	Items      []SMSItem `json:"items"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// UserSMSPage returns a page of the finished SMS of a user, in seq order, after cursor ("":
// from the first). It returns an apperr.Invalid error for a bad limit or cursor.
func (s *Store) UserSMSPage(ctx context.Context, userID int64, limit int, cursor string) (SMSPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return SMSPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return SMSPage{}, err
	}
	items, err := s.userSMS(ctx, userID, c.S, limit+1)
	if err != nil {
		return SMSPage{}, err
	}
	page := SMSPage{UserID: userID, Items: nonNil(items)}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{S: items[limit-1].Seq})
	}
	return page, nil
}

func (s *Store) userSMS(ctx context.Context, userID, afterSeq int64, limit int) ([]SMSItem, error) {
	rows, err := s.db.Query(ctx, userSMSSQL, pgx.StrictNamedArgs{"user": userID, "after_seq": afterSeq, "replay": deadletters.ActionReplay, "limit": limit})
	if err != nil {
		return nil, fmt.Errorf("list SMS of user %d: %w", userID, err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SMSItem, error) {
		var it SMSItem
		var event []byte
		var replayedAt *time.Time
		if err := r.Scan(&it.Seq, &it.Status, &it.Attempts, &it.LastError, &it.Kind, &it.Text, &event,
			&it.FinishedAt, &it.ReplayCount, &replayedAt); err != nil {
			return it, err
		}
		it.Kind, it.Text = fillFromEvent(it.Kind, it.Text, event)
		if it.Status == gate.StatusSent {
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
		if m, err := notify.Render(e); err == nil {
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
	// Phone is the number of the user's latest event, masked but for its last four digits.
	Phone string `json:"phone"`
}

// UserPage is a page of users in user_id order.
type UserPage struct {
	Items      []UserSummary `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// Users lists the users that have notifications, by user id, limit per page; with phone
// set (an E.164 number), only those with an event addressed to it. It returns an
// apperr.Invalid error for a bad limit, cursor or phone.
func (s *Store) Users(ctx context.Context, limit int, cursor, phone string) (UserPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return UserPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return UserPage{}, err
	}
	query, args := userIDsSQL, pgx.StrictNamedArgs{"after_user": c.U, "limit": limit + 1}
	if phone != "" {
		if !phoneRE.MatchString(phone) {
			// Masked: the message is what the access log records of a refused request.
			return UserPage{}, apperr.New(apperr.Invalid, "phone must be an E.164 number such as +8613800001234, got %q", redact.Phone(phone))
		}
		query, args["phone"] = userIDsByPhoneSQL, phone
	}
	rows, err := s.db.Query(ctx, query, args)
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	page := UserPage{Items: []UserSummary{}}
	if len(ids) > limit {
		ids = ids[:limit]
		page.NextCursor = encodeCursor(cursorKey{U: ids[limit-1]})
	}
	if len(ids) == 0 {
		return page, nil
	}
	rows, err = s.db.Query(ctx, usersSQL, pgx.StrictNamedArgs{"ids": ids})
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UserSummary, error) {
		var u UserSummary
		err := r.Scan(&u.UserID, &u.Sent, &u.DeadLettered, &u.Skipped, &u.Pending, &u.LastSeq, &u.MissingSeq, &u.GapSince, &u.UpdatedAt, &u.Phone)
		u.Phone = redact.Phone(u.Phone)
		return u, err
	})
	if err != nil {
		return UserPage{}, fmt.Errorf("list users: %w", err)
	}
	page.Items = nonNil(items)
	return page, nil
}

// phoneRE is the form of a phone number the search takes: E.164, as the wallet stores it.
var phoneRE = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

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
	rows, err := s.db.Query(ctx, deadLettersSQL, pgx.StrictNamedArgs{
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
	rows, err := s.db.Query(ctx, badMessagesSQL, pgx.StrictNamedArgs{"before_at": c.timeOr(pgtype.Infinity), "before_msg_id": c.M, "limit": limit + 1})
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
	rows, err := s.db.Query(ctx, changesSQL, pgx.StrictNamedArgs{
		"after_at": c.timeOr(pgtype.NegativeInfinity), "after_user": c.U, "after_seq": c.S, "limit": limit, "lag_us": FeedLag.Microseconds(),
	})
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
		if ch.Status == gate.StatusSent {
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

// ActivityPage is a page of the recent activity, newest first.
type ActivityPage struct {
	Items      []Change `json:"items"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Activity returns the notifications changed before cursor ("": the newest), newest first
// by (updated_at, user_id, seq): one page of the recent activity, read backwards on the
// index the change feed reads forwards. It returns an apperr.Invalid error for a bad limit
// or cursor.
func (s *Store) Activity(ctx context.Context, limit int, cursor string) (ActivityPage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return ActivityPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return ActivityPage{}, err
	}
	rows, err := s.db.Query(ctx, activitySQL, pgx.StrictNamedArgs{
		"before_at": c.timeOr(pgtype.Infinity), "before_user": c.U, "before_seq": c.S, "limit": limit + 1,
	})
	if err != nil {
		return ActivityPage{}, fmt.Errorf("list recent activity: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Change, error) {
		var ch Change
		var event []byte
		err := r.Scan(&ch.UserID, &ch.Seq, &ch.Kind, &ch.Text, &event, &ch.Status, &ch.Attempts, &ch.LastError,
			&ch.FinishedAt, &ch.UpdatedAt)
		ch.Kind, ch.Text = fillFromEvent(ch.Kind, ch.Text, event)
		if ch.Status == gate.StatusSent {
			ch.SentAt = ch.FinishedAt
		}
		return ch, err
	})
	if err != nil {
		return ActivityPage{}, fmt.Errorf("list recent activity: %w", err)
	}
	page := ActivityPage{Items: nonNil(items)}
	if len(items) > limit {
		last := items[limit-1]
		page.Items = items[:limit]
		page.NextCursor = encodeCursor(cursorKey{T: last.UpdatedAt.UnixMicro(), HasT: true, U: last.UserID, S: last.Seq})
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
	rows, err := s.db.Query(ctx, auditSQL, pgx.StrictNamedArgs{"before_id": before, "limit": limit + 1})
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
	if err := s.db.QueryRow(ctx, dlqDepthSQL, pgx.StrictNamedArgs{"replay": deadletters.ActionReplay}).Scan(&n); err != nil {
		return 0, fmt.Errorf("dlq depth: %w", err)
	}
	return n, nil
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
