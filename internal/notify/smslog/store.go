// The Store, and what every list shares: page bounds, cursors, kind and text from the stored event.

// Package smslog is the SMS log as people read it: each user's SMS in order, the users, the
// dead letters, the bad messages, the change feed the page polls, the operators' audit trail
// and the CLI's printout. It reads the notifier's tables (the gate's, the inbox's, the dead
// letters') with statements of its own, read-only, and writes none: the read side of the
// notifier, one place to look when a table changes besides its owner.
//
// Its files: store.go, the Store and what every list shares (page bounds, cursors);
// user_sms.go and users.go, a user's SMS and the users (the page, the API, the CLI); feed.go,
// the change feed and the recent activity the page polls; operator.go, what an operator reads
// (dead letters, bad messages, the audit trail, the DLQ depth); print.go, the CLI's printout.
package smslog

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Pagination bounds of the list methods.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// Store reads the notifier's tables for the API, the page, the CLI and the metrics. It
// writes nothing. It is safe for concurrent use.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

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

// --- pagination ---

func checkLimit(limit int) (int, error) {
	return checkLimitUpTo(limit, MaxPageSize)
}

// checkLimitUpTo is checkLimit for a list whose pages hold at most most items: 0 is
// DefaultPageSize (or most, when smaller).
func checkLimitUpTo(limit, most int) (int, error) {
	if limit == 0 {
		return min(DefaultPageSize, most), nil
	}
	if limit < 0 || limit > most {
		return 0, apperr.New(apperr.Invalid, "limit must be between 1 and %d, got %d", most, limit)
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
