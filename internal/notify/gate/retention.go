// Retention: the gate prunes its own tables.

package gate

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// Retention: the gate prunes its own tables (docs/ARCHITECTURE.md, Retention). A user's
// position, notify.progress, is never pruned: it is what says a seq is finished once the
// seq's inbox row is gone.

var (
	//go:embed sql/prune_inbox.sql
	pruneInboxSQL string
	//go:embed sql/oldest_inbox.sql
	oldestInboxSQL string
	//go:embed sql/prune_sms_log.sql
	pruneSMSLogSQL string
	//go:embed sql/oldest_sms_log.sql
	oldestSMSLogSQL string
	//go:embed sql/prune_wakes.sql
	pruneWakesSQL string
	//go:embed sql/oldest_wake.sql
	oldestWakeSQL string
	//go:embed sql/finished.sql
	finishedSQL string
	//go:embed sql/prune_rewound.sql
	pruneRewoundSQL string
	//go:embed sql/oldest_rewound.sql
	oldestRewoundSQL string
)

// PruneRewound deletes up to limit rows set aside from rewound histories (notify.rewound)
// that were set aside more than window ago, oldest first.
func (s *Store) PruneRewound(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return s.prune(ctx, "rewound", pruneRewoundSQL, window, limit)
}

// OldestRewound returns the age of the oldest row set aside from a rewound history.
func (s *Store) OldestRewound(ctx context.Context) (time.Duration, error) {
	return s.oldest(ctx, "rewound", oldestRewoundSQL)
}

// PruneInbox deletes up to limit inbox rows that finished more than window ago (sent,
// skipped, or dead-lettered with the dead letter published), oldest first, and returns how
// many it deleted. A pending row, and a dead letter not yet published to the DLQ, are never
// deleted; a redelivery of a pruned seq is still ignored, by the user's position.
func (s *Store) PruneInbox(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return s.prune(ctx, "inbox", pruneInboxSQL, window, limit)
}

// OldestInbox returns how long ago the oldest finished inbox row finished.
func (s *Store) OldestInbox(ctx context.Context) (time.Duration, error) {
	return s.oldest(ctx, "inbox", oldestInboxSQL)
}

// PruneSMSLog deletes up to limit SMS log rows written more than window ago, oldest first.
func (s *Store) PruneSMSLog(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return s.prune(ctx, "SMS log", pruneSMSLogSQL, window, limit)
}

// OldestSMSLog returns the age of the oldest SMS log row.
func (s *Store) OldestSMSLog(ctx context.Context) (time.Duration, error) {
	return s.oldest(ctx, "SMS log", oldestSMSLogSQL)
}

// PruneWakes deletes up to limit wake rows older than window that wake nobody (their user is
// due anyway, or has nothing pending): a wake that alone would bring an idle user's next SMS
// to a lane stays.
func (s *Store) PruneWakes(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return s.prune(ctx, "wakes", pruneWakesSQL, window, limit)
}

// OldestWake returns the age of the oldest wake row.
func (s *Store) OldestWake(ctx context.Context) (time.Duration, error) {
	return s.oldest(ctx, "wakes", oldestWakeSQL)
}

// Finished reports whether user's position is at or past seq: its SMS finished, whether or
// not its inbox row is still kept.
func (s *Store) Finished(ctx context.Context, userID, seq int64) (bool, error) {
	var done bool
	if err := s.db.QueryRow(ctx, finishedSQL, pg.Args{"user": userID, "seq": seq}).Scan(&done); err != nil {
		return false, fmt.Errorf("read the position of user %d: %w", userID, err)
	}
	return done, nil
}

func (s *Store) prune(ctx context.Context, what, sql string, window time.Duration, limit int) (int64, error) {
	tag, err := s.db.Exec(ctx, sql, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("prune the %s: %w", what, err)
	}
	return tag.RowsAffected(), nil
}

func (s *Store) oldest(ctx context.Context, what, sql string) (time.Duration, error) {
	d, err := pg.Age(ctx, s.db, sql)
	if err != nil {
		return 0, fmt.Errorf("read the oldest row of the %s: %w", what, err)
	}
	return d, nil
}
