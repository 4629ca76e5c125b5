// Package notifytest seeds the notifier's tables directly, for tests of the read side
// (the inbox and the lanes normally write them).
package notifytest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// Row is one notify.notifications row to seed. Event is stored as the inbox stores it;
// Text, Kind and FinishedAt are stored when set. UpdatedAt defaults to now().
type Row struct {
	Event      walletevent.Event
	Status     string
	Attempts   int
	LastError  string
	Text       string
	FinishedAt time.Time
	UpdatedAt  time.Time
}

// Event returns a valid deposit-like event for (user, seq) with the given kind and amount;
// the balance after is 10000 + amount, phone +861380000xxxx, locale en.
func Event(user, seq int64, kind walletevent.Kind, amount int64) walletevent.Event {
	return walletevent.Event{
		V: walletevent.Version, EventID: user*1000 + seq, UserID: user, Seq: seq, Kind: kind,
		Amount: amount, Currency: "CNY", BalanceAfter: 10000 + amount, SagaID: seq,
		Phone: "+8613800001234", Locale: "en", OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Epoch: Epoch, EpochSince: 1,
	}
}

// Epoch is the wallet epoch of Event's events: one unbroken history, from each user's seq 1.
const Epoch = 1767225600000000

// Seed inserts rows into notify.notifications, failing the test on error.
func Seed(t testing.TB, pool *pgxpool.Pool, rows ...Row) {
	t.Helper()
	ctx := context.Background()
	for _, r := range rows {
		ev, err := json.Marshal(r.Event)
		if err != nil {
			t.Fatalf("notifytest: encode event: %v", err)
		}
		var finished, updated *time.Time
		if !r.FinishedAt.IsZero() {
			finished = &r.FinishedAt
		}
		if !r.UpdatedAt.IsZero() {
			updated = &r.UpdatedAt
		}
		var text *string
		if r.Text != "" {
			text = &r.Text
		}
		_, err = pool.Exec(ctx, `
			INSERT INTO notify.notifications (user_id, seq, status, attempts, last_error, event, kind, text, finished_at, updated_at)
			VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7, $8, $9, coalesce($10, now()))`,
			r.Event.UserID, r.Event.Seq, r.Status, r.Attempts, r.LastError, ev, string(r.Event.Kind), text, finished, updated)
		if err != nil {
			t.Fatalf("notifytest: seed user %d seq %d: %v", r.Event.UserID, r.Event.Seq, err)
		}
	}
}
