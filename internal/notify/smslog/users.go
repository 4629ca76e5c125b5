// The users the notifier knows, with their SMS counted by status.

package smslog

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/redact"
)

var (
	//go:embed sql/users.sql
	usersSQL string
	//go:embed sql/user_ids.sql
	userIDsSQL string
	//go:embed sql/user_ids_by_phone.sql
	userIDsByPhoneSQL string
)

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

// MaxUsersPage is the most users a page of Users holds: each user's summary counts that
// user's SMS, so a page's cost grows with its users' histories, not only with its size (a
// page of 1,000 took 131 ms of the database's CPU in the abuse bench).
const MaxUsersPage = 100

// Users lists the users that have notifications, by user id, limit per page (at most
// MaxUsersPage); with phone set (an E.164 number), only those with an event addressed to
// it. It returns an apperr.Invalid error for a bad limit, cursor or phone.
func (s *Store) Users(ctx context.Context, limit int, cursor, phone string) (UserPage, error) {
	limit, err := checkLimitUpTo(limit, MaxUsersPage)
	if err != nil {
		return UserPage{}, err
	}
	c, err := decodeCursor(cursor)
	if err != nil {
		return UserPage{}, err
	}
	query, args := userIDsSQL, pg.Args{"after_user": c.U, "limit": limit + 1}
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
	rows, err = s.db.Query(ctx, usersSQL, pg.Args{"ids": ids})
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
