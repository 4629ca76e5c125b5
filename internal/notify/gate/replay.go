// The operator's replay of a dead letter: read it, lock it, journal its late SMS.

package gate

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/dead_letter.sql
	deadLetterSQL string
	//go:embed sql/lock_dead_letter.sql
	lockDeadLetterSQL string
	//go:embed sql/journal_late.sql
	journalLateSQL string
)

// StoredSMS is an SMS as an operator's replay reads it.
type StoredSMS struct {
	Status string
	Event  []byte // the wallet event the inbox stored
	// LateJournaled is set when its late SMS log row is there: a journaled sender delivered
	// a replay of it already.
	LateJournaled bool
	// Traceparent is the inbox span that recorded its arrival ("" untraced): the replay's
	// span links to it.
	Traceparent string
}

// DeadLetter reads the SMS (userID, seq), or returns pgx.ErrNoRows.
func (s *Store) DeadLetter(ctx context.Context, userID, seq int64) (StoredSMS, error) {
	var m StoredSMS
	err := s.db.QueryRow(ctx, deadLetterSQL, pg.Args{"user": userID, "seq": seq}).Scan(&m.Status, &m.Event, &m.LateJournaled, &m.Traceparent)
	if err != nil {
		return StoredSMS{}, fmt.Errorf("read the SMS of user %d seq %d: %w", userID, seq, err)
	}
	return m, nil
}

// LockDeadLetter locks the row of the SMS (userID, seq) in tx and returns its status.
func (s *Store) LockDeadLetter(ctx context.Context, tx pgx.Tx, userID, seq int64) (string, error) {
	var status string
	if err := tx.QueryRow(ctx, lockDeadLetterSQL, pg.Args{"user": userID, "seq": seq}).Scan(&status); err != nil {
		return "", fmt.Errorf("lock the SMS of user %d seq %d: %w", userID, seq, err)
	}
	return status, nil
}

// JournalLate writes, in tx, the late SMS log row of a replay of (userID, seq) to phone with
// text, once per (user, seq): a journaled sender's delivery of it. It reports whether a row
// was written (false: it was delivered late before).
func (s *Store) JournalLate(ctx context.Context, tx pgx.Tx, userID, seq int64, phone, text string) (bool, error) {
	tag, err := tx.Exec(ctx, journalLateSQL, pg.Args{"user": userID, "seq": seq, "phone": phone, "text": text})
	if err != nil {
		return false, fmt.Errorf("log the replay of user %d seq %d: %w", userID, seq, err)
	}
	return tag.RowsAffected() == 1, nil
}
