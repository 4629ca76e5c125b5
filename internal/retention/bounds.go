package retention

import (
	"fmt"
	"time"
)

// Bounds are the windows a setting accepts. In production a window is 0 (where Forever
// allows it) or within [Min, Max]; in dev the floor is DevMin instead, so that a demo or a
// chaos run can prune within seconds.
type Bounds struct {
	Min, Max time.Duration // Max 0: no upper bound
	DevMin   time.Duration
	Forever  bool // 0 (keep forever) is allowed
}

// The windows of each kind of row, and the defaults, as docs/ARCHITECTURE.md (Retention)
// explains them.
var (
	// OutboxBounds: a published outbox row is needed by nothing (the notifier's gate holds
	// what it finished), so an hour's floor is only for people looking.
	OutboxBounds = Bounds{Min: time.Hour, DevMin: time.Second, Forever: true}
	// SagaBounds: finished sagas, for people and for the answer to a repeated
	// Idempotency-Key (a window below the keys' is refused, see CheckSagasOutliveKeys).
	SagaBounds = Bounds{Min: 24 * time.Hour, DevMin: time.Second, Forever: true}
	// IdempotencyBounds: 24 h to 30 days, as payment APIs keep their keys.
	IdempotencyBounds = Bounds{Min: 24 * time.Hour, Max: 30 * 24 * time.Hour, DevMin: time.Second}
	// InboxBounds: finished inbox rows, the SMS log, and bad messages once in the DLQ topic.
	InboxBounds = Bounds{Min: time.Hour, DevMin: time.Second, Forever: true}
	// WakeBounds: wake rows nobody needs any more.
	WakeBounds = Bounds{Min: time.Minute, DevMin: time.Second, Forever: true}
	// OperationBounds: the wallet's rows of pruned sagas, which answer 410 while kept.
	OperationBounds = Bounds{Min: 24 * time.Hour, DevMin: time.Second, Forever: true}
	// AuditBounds: operators' audit trails (each service's), once what they name is pruned.
	// At least 30 days: an incident's review comes weeks later.
	AuditBounds = Bounds{Min: 30 * 24 * time.Hour, DevMin: time.Second, Forever: true}
)

// The default windows.
const (
	DefaultOutbox      = 7 * 24 * time.Hour
	DefaultSagas       = 30 * 24 * time.Hour
	DefaultIdempotency = 7 * 24 * time.Hour
	DefaultInbox       = 30 * 24 * time.Hour
	DefaultSMSLog      = 30 * 24 * time.Hour
	DefaultWakes       = time.Hour
	DefaultOperations  = 30 * 24 * time.Hour
	DefaultBadMessages = 30 * 24 * time.Hour
	DefaultAudit       = 365 * 24 * time.Hour
	DefaultBatch       = 1000
	DefaultPause       = 100 * time.Millisecond
)

// Check returns "" when d is a window b accepts in dev (dev) or production, else what is
// wrong, for a message that names the setting.
func (b Bounds) Check(dev bool, d time.Duration) string {
	lo := b.Min
	if dev {
		lo = b.DevMin
	}
	forever := ""
	if b.Forever {
		forever = " or 0 (keep forever)"
	}
	switch {
	case d == 0 && b.Forever:
		return ""
	case d < lo || (b.Max > 0 && d > b.Max):
		if b.Max > 0 {
			return fmt.Sprintf("must be %s–%s%s, got %s", lo, b.Max, forever, d)
		}
		return fmt.Sprintf("must be at least %s%s, got %s", lo, forever, d)
	}
	return ""
}

// CheckSagasOutliveKeys returns "" when finished sagas are kept at least as long as
// idempotency keys: a repeated key answers with its saga, which must still be there.
func CheckSagasOutliveKeys(sagas, keys time.Duration) string {
	if sagas != 0 && sagas < keys {
		return fmt.Sprintf("must be at least the idempotency key window (%s), got %s: a repeated key answers with its saga", keys, sagas)
	}
	return ""
}
