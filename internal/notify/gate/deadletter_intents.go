// Dead-letter intents: what the DLQ publisher publishes, and what the reconciler finds there.

package gate

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/dead_letter_intents.sql
	deadLetterIntentsSQL string
	//go:embed sql/mark_dead_letters_published.sql
	markDeadLettersPublishedSQL string
	//go:embed sql/unpublished_dead_letters.sql
	unpublishedDeadLettersSQL string
	//go:embed sql/found_dead_letter.sql
	foundDeadLetterSQL string
)

// DeadLetter is a dead-lettered SMS to publish to the DLQ topic.
type DeadLetter struct {
	UserID int64
	Seq    int64
	MsgID  string
	Event  []byte
	Reason string
}

// DeadLetterIntents returns up to limit dead-lettered SMS not yet published to the DLQ topic,
// oldest first.
func (s *Store) DeadLetterIntents(ctx context.Context, limit int) ([]DeadLetter, error) {
	rows, err := s.db.Query(ctx, deadLetterIntentsSQL, pg.Args{"limit": limit})
	if err != nil {
		return nil, fmt.Errorf("dead-letter intents: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeadLetter])
	if err != nil {
		return nil, fmt.Errorf("dead-letter intents: %w", err)
	}
	return out, nil
}

// MarkDeadLettersPublished records that these dead letters are in the DLQ topic.
func (s *Store) MarkDeadLettersPublished(ctx context.Context, done []DeadLetter) error {
	users, seqs := make([]int64, len(done)), make([]int64, len(done))
	for i, d := range done {
		users[i], seqs[i] = d.UserID, d.Seq
	}
	if _, err := s.db.Exec(ctx, markDeadLettersPublishedSQL, pg.Args{"users": users, "seqs": seqs}); err != nil {
		return fmt.Errorf("mark %d dead letters published: %w", len(done), err)
	}
	return nil
}

// UnpublishedDeadLetters counts the dead-lettered SMS not yet published to the DLQ topic.
func (s *Store) UnpublishedDeadLetters(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, unpublishedDeadLettersSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unpublished dead letters: %w", err)
	}
	return n, nil
}

// FoundDeadLetter makes sure a (user, seq) found in the DLQ topic is recorded: the
// reconciler's half of "dead letters, consistent both ways". A row the inbox has already
// (pending or finished) is left alone — the lane decides a pending one; a missing one is
// recorded dead-lettered and published, and its user woken so a lane moves past it; one of
// another history than the user's (History) is left alone. It reports whether it recorded
// anything.
func (s *Store) FoundDeadLetter(ctx context.Context, a Arrival, reason string) (bool, error) {
	at, err := positions(ctx, s.db, positionsSQL, []int64{a.UserID})
	if err != nil {
		return false, fmt.Errorf("record dead letter %d:%d found in the DLQ: %w", a.UserID, a.Seq, err)
	}
	if Admit(at[a.UserID], a.Seq, 0) == Finished {
		return false, nil
	}
	if _, known := at[a.UserID]; known && Place(at[a.UserID], a.Epoch, a.Seq) != Same {
		// Of a history the wallet rewound, or of an epoch the gate has not taken yet (whose
		// events rewind the user when they arrive): not a gap of the user's current history.
		return false, nil
	}
	var recorded bool
	err = s.db.QueryRow(ctx, foundDeadLetterSQL, pg.Args{
		"user": a.UserID, "seq": a.Seq, "msg_id": a.MsgID, "event": string(a.Event), "kind": a.Kind, "text": a.Text,
		"reason": freetext.Clip(reason, maxReason),
	}).Scan(&recorded)
	if err != nil {
		return false, fmt.Errorf("record dead letter %d:%d found in the DLQ: %w", a.UserID, a.Seq, err)
	}
	return recorded, nil
}
