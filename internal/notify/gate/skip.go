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
	//go:embed sql/skip_range_position.sql
	skipRangePositionSQL string
	//go:embed sql/skip_range_record.sql
	skipRangeRecordSQL string
)

// MaxSkipRange is the most seqs one SkipThrough may skip: a range longer than that is
// skipped in several steps, each bounded.
const MaxSkipRange = 100_000

// ErrSkipRangeTooLong means a SkipThrough asked for more than MaxSkipRange seqs.
var ErrSkipRangeTooLong = fmt.Errorf("gate: at most %d seqs are skipped at once", MaxSkipRange)

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

// SkippedRange is what SkipThrough did: the seqs it recorded skipped (from the user's next seq
// through the one asked), how many of them, and the user's progress after it.
type SkippedRange struct {
	From, Through int64
	Skipped       int
	LastSeq       int64
}

// SkipThrough records, in the caller's transaction tx, every seq of a held user from its next
// (last_seq + 1) through through that never arrived as skipped_by_operator, and advances the
// user past them and past any finished successors; a seq of the range that did arrive keeps
// its row and is sent, in order. It is for events the broker no longer has (older than its
// retention, after a restore of the notifier's database or a group's first start): one
// audited step instead of one skip per seq. The user must be held: an SMS after through waits
// in the inbox, through is at or past its next seq, and a seq of the range never arrived
// (else ErrNotHeld); at most MaxSkipRange seqs on (else ErrSkipRangeTooLong). The user is
// then due.
func (s *Store) SkipThrough(ctx context.Context, tx pgx.Tx, userID, through int64, reason string) (SkippedRange, error) {
	var p Position
	var held bool
	err := tx.QueryRow(ctx, skipRangePositionSQL, pg.Args{"user": userID, "through": through}).Scan(&p.LastSeq, &held)
	if errors.Is(err, pgx.ErrNoRows) {
		return SkippedRange{}, ErrNotHeld
	}
	if err != nil {
		return SkippedRange{}, fmt.Errorf("skip %d through %d: %w", userID, through, err)
	}
	r := SkippedRange{From: p.LastSeq + 1, Through: through}
	switch {
	case through-r.From >= MaxSkipRange:
		return SkippedRange{}, ErrSkipRangeTooLong
	case through < r.From || !held:
		return SkippedRange{}, ErrNotHeld
	}
	rows, err := tx.Query(ctx, skipRangeRecordSQL, pg.Args{
		"user": userID, "from": r.From, "through": through, "reason": freetext.Clip("skipped by an operator: "+reason, maxReason),
	})
	if err != nil {
		return SkippedRange{}, fmt.Errorf("skip %d through %d: %w", userID, through, err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return SkippedRange{}, fmt.Errorf("skip %d through %d: %w", userID, through, err)
	}
	r.Skipped = len(seqs)
	if r.Skipped == 0 {
		return SkippedRange{}, ErrNotHeld // every seq of the range arrived: nothing is lost
	}
	if err := tx.QueryRow(ctx, skipAdvanceSQL, pg.Args{"user": userID, "last_seq": p.LastSeq}).Scan(&r.LastSeq); err != nil {
		return SkippedRange{}, fmt.Errorf("skip %d through %d: %w", userID, through, err)
	}
	// A lane that holds the user and gives it back as idle must not strand it.
	if _, err := tx.Exec(ctx, wakeSQL, pg.Args{"user": userID}); err != nil {
		return SkippedRange{}, fmt.Errorf("skip %d through %d: %w", userID, through, err)
	}
	return r, nil
}
