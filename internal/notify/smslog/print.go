// The CLI's printout of a user's SMS log, and its follow mode.

package smslog

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
)

// FollowInterval is how often PrintSMSLog looks for new SMS when following.
const FollowInterval = 500 * time.Millisecond

// PrintSMSLog writes the SMS log of a user to w as aligned text, one line per finished SMS
// in seq order: seq, status, sent_at (UTC, "-" when not sent) and text, with dead letters
// and operator replays marked after the text. With follow it then polls every
// FollowInterval for newer SMS until ctx is done, and returns nil.
func PrintSMSLog(ctx context.Context, store *Store, userID int64, follow bool, w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%6s  %-19s  %-20s  %s\n", "SEQ", "STATUS", "SENT_AT", "TEXT"); err != nil {
		return err
	}
	var last int64
	printNew := func() error {
		items, err := store.UserSMS(ctx, userID, last)
		if err != nil {
			return err
		}
		for _, it := range items {
			if _, err := io.WriteString(w, formatSMSLine(it)); err != nil {
				return err
			}
			last = it.Seq
		}
		return nil
	}
	if err := printNew(); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	t := time.NewTicker(FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := printNew(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func formatSMSLine(it SMSItem) string {
	sent := "-"
	if it.SentAt != nil {
		sent = it.SentAt.UTC().Format(time.RFC3339)
	}
	line := fmt.Sprintf("%6d  %-19s  %-20s  %s", it.Seq, it.Status, sent, it.Text)
	if it.Status == gate.StatusDeadLettered {
		line += fmt.Sprintf("  [DEAD-LETTERED after %d attempts: %s]", it.Attempts, it.LastError)
	}
	if it.ReplayCount > 0 && it.ReplayedAt != nil {
		line += fmt.Sprintf("  [replayed late %d×, last %s]", it.ReplayCount, it.ReplayedAt.UTC().Format(time.RFC3339))
	}
	return line + "\n"
}
