// A user's SMS in seq order: the log as the page, the API and the CLI read it.

package smslog

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/user_sms.sql
	userSMSSQL string
)

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
	rows, err := s.db.Query(ctx, userSMSSQL, pg.Args{"user": userID, "after_seq": afterSeq, "replay": deadletters.ActionReplay, "limit": limit})
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
