// The operator's skip of a lost seq.

package gate

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/skip_position.sql
	skipPositionSQL string
	//go:embed sql/skip_arrived.sql
	skipArrivedSQL string
	//go:embed sql/skip_record.sql
	skipRecordSQL string
	//go:embed sql/skip_advance.sql
	skipAdvanceSQL string
	//go:embed sql/wake.sql
	wakeSQL string
)

// ErrNotHeld means an operator asked to skip a seq no user is held by: the user's next seq
// (last_seq + 1) is not that one, or nothing later waits behind it.
var ErrNotHeld = errors.New("gate: the user is not held by that missing seq")

// ErrNotLost means the seq an operator asked to skip has arrived: it is in the inbox or
// finished, so it is not lost and must not be skipped.
var ErrNotLost = errors.New("gate: that seq has arrived; it is not lost")

// Skip records, in the caller's transaction tx, the missing seq of a held user as
// skipped_by_operator and advances the user past it (and past any finished successors); the
// user is then due, so its waiting SMS go out. seq must be last_seq + 1 of a user with later
// SMS waiting (else ErrNotHeld), and must never have arrived (else ErrNotLost). It returns
// the user's new progress.
func (s *Store) Skip(ctx context.Context, tx pgx.Tx, userID, seq int64, reason string) (int64, error) {
	var p Position
	var waiting bool
	err := tx.QueryRow(ctx, skipPositionSQL, pg.Args{"user": userID}).Scan(&p.LastSeq, &p.Fence, &p.Leased, &waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNotHeld
	}
	if err != nil {
		return 0, fmt.Errorf("skip %d:%d: %w", userID, seq, err)
	}
	if Admit(p, seq, 0) != Next || !waiting {
		return 0, ErrNotHeld
	}
	var status string
	err = tx.QueryRow(ctx, skipArrivedSQL, pg.Args{"user": userID, "seq": seq}).Scan(&status)
	if err == nil {
		return 0, fmt.Errorf("%w (status %s)", ErrNotLost, status)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("skip %d:%d: %w", userID, seq, err)
	}
	if _, err := tx.Exec(ctx, skipRecordSQL, pg.Args{
		"user": userID, "seq": seq, "reason": freetext.Clip("skipped by an operator: "+reason, maxReason),
	}); err != nil {
		return 0, fmt.Errorf("skip %d:%d: %w", userID, seq, err)
	}
	var last int64
	if err := tx.QueryRow(ctx, skipAdvanceSQL, pg.Args{"user": userID, "last_seq": Advance(p, seq, Skipped).LastSeq}).Scan(&last); err != nil {
		return 0, fmt.Errorf("skip %d:%d: %w", userID, seq, err)
	}
	// A lane that holds the user and gives it back as idle must not strand it.
	if _, err := tx.Exec(ctx, wakeSQL, pg.Args{"user": userID}); err != nil {
		return 0, fmt.Errorf("skip %d:%d: %w", userID, seq, err)
	}
	return last, nil
}
