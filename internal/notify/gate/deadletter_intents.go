// Dead-letter intents: what the DLQ publisher publishes, and what the reconciler finds there.

package gate

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/dead_letter_intents.sql
	deadLetterIntentsSQL string
	//go:embed sql/mark_dead_letters_published.sql
	markDeadLettersPublishedSQL string
	//go:embed sql/unpublished_dead_letters.sql
	unpublishedDeadLettersSQL string
	//go:embed sql/known_dead_letter.sql
	knownDeadLetterSQL string
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

// KnowsDeadLetter reports whether the gate knows (user, seq), found in the DLQ topic: the inbox
// has its row (this deployment dead-lettered it, or has it pending), its user is past it (a
// row retention pruned since), or it is of another history than the user's (History). One
// the gate does not know is no dead letter of this deployment's: the reconciler flags it and
// records nothing at the gate (the DLQ is not an input: whoever can publish to it must not be
// able to move a user past an SMS).
func (s *Store) KnowsDeadLetter(ctx context.Context, a Arrival) (bool, error) {
	at, err := positions(ctx, s.db, positionsSQL, []int64{a.UserID})
	if err != nil {
		return false, fmt.Errorf("look up dead letter %d:%d found in the DLQ: %w", a.UserID, a.Seq, err)
	}
	if p, ok := at[a.UserID]; ok && (Admit(p, a.Seq, 0) == Finished || Place(p, a.Epoch, a.Seq) != Same) {
		return true, nil
	}
	var known bool
	if err := s.db.QueryRow(ctx, knownDeadLetterSQL, pg.Args{"user": a.UserID, "seq": a.Seq}).Scan(&known); err != nil {
		return false, fmt.Errorf("look up dead letter %d:%d found in the DLQ: %w", a.UserID, a.Seq, err)
	}
	return known, nil
}
