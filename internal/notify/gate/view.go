// The gate as /v1/gate and the metrics show it: counts, gaps, baselines.

package gate

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/view_counts.sql
	viewCountsSQL string
	//go:embed sql/view_gaps.sql
	viewGapsSQL string
	//go:embed sql/view_baselines.sql
	viewBaselinesSQL string
)

// Gap is a user whose next SMS has not arrived while later ones wait in the inbox.
type Gap struct {
	UserID      int64     `json:"user_id"`
	LastSeq     int64     `json:"last_seq"`
	MissingSeq  int64     `json:"missing_seq"`
	WaitingSeqs int64     `json:"waiting"` // SMS in the inbox behind the gap
	Since       time.Time `json:"since"`
	// Alert is set once the gap is older than the alert threshold: an operator should look
	// (the skip action is the only way past a seq that is truly lost).
	Alert bool `json:"alert"`
}

// Baseline is where a user started because the consumer group started from the end of
// the topic: SMS before Seq were never received and are not sent.
type Baseline struct {
	UserID int64     `json:"user_id"`
	Seq    int64     `json:"baseline_seq"`
	At     time.Time `json:"at"`
}

// View is what the gate holds, as /v1/gate and the metrics show it.
type View struct {
	Pending   int64      `json:"pending"`      // SMS in the inbox
	Due       int64      `json:"due_users"`    // users a claim would take now
	Gaps      []Gap      `json:"gaps"`         // longest first, at most the limit
	GapAlerts int64      `json:"gap_alerts"`   // users held by a gap older than the threshold
	OldestGap float64    `json:"oldest_gap_s"` // seconds
	Baselines []Baseline `json:"baselines"`    // newest first, at most the limit
}

// View reads what the gate holds: counts, the gaps (longest first) and the baselines (newest
// first), at most limit of each; a gap older than alertAfter is an alert.
func (s *Store) View(ctx context.Context, limit int, alertAfter time.Duration) (View, error) {
	var v View
	err := s.db.QueryRow(ctx, viewCountsSQL, pg.Args{"alert_after_us": alertAfter.Microseconds()}).
		Scan(&v.Pending, &v.Due, &v.GapAlerts, &v.OldestGap)
	if err != nil {
		return View{}, fmt.Errorf("gate view: %w", err)
	}
	v.Gaps, v.Baselines = []Gap{}, []Baseline{}
	if limit <= 0 {
		return v, nil
	}
	rows, err := s.db.Query(ctx, viewGapsSQL, pg.Args{"limit": limit, "alert_after_us": alertAfter.Microseconds()})
	if err != nil {
		return View{}, fmt.Errorf("gate view: gaps: %w", err)
	}
	if v.Gaps, err = pgx.AppendRows(v.Gaps, rows, pgx.RowToStructByPos[Gap]); err != nil {
		return View{}, fmt.Errorf("gate view: gaps: %w", err)
	}
	rows, err = s.db.Query(ctx, viewBaselinesSQL, pg.Args{"limit": limit})
	if err != nil {
		return View{}, fmt.Errorf("gate view: baselines: %w", err)
	}
	if v.Baselines, err = pgx.AppendRows(v.Baselines, rows, pgx.RowToStructByPos[Baseline]); err != nil {
		return View{}, fmt.Errorf("gate view: baselines: %w", err)
	}
	return v, nil
}
