// The change feed the page polls, and the recent activity it opens with.

package smslog

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/pg"
)

// FeedLag is how far behind the database clock the change feed's cursor stays. A lane's
// record stamps updated_at when its statement starts and becomes visible when it commits;
// rows younger than FeedLag are sent again on the next poll so that one committing late is
// not skipped. It must exceed the longest such statement by far (they take milliseconds; the
// provider is called before, never during, them).
const FeedLag = 10 * time.Second

var (
	//go:embed sql/changes.sql
	changesSQL string
	//go:embed sql/activity.sql
	activitySQL string
)

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
	rows, err := s.db.Query(ctx, changesSQL, pg.Args{
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
	rows, err := s.db.Query(ctx, activitySQL, pg.Args{
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
