package wallet

import (
	"time"

	"github.com/walletsaga/walletsaga/internal/retention"
)

// RetentionWindows are how long the wallet keeps each kind of prunable row (0: forever).
type RetentionWindows struct {
	Outbox, Sagas, Operations, IdempotencyKeys, Audit time.Duration
}

// RetentionTables are what walletsvc's pruner prunes, each by its owner's statement:
// published outbox rows (outbox), finished sagas (the engine's, through its API, with the
// wallet's operation rows marked in the same transaction), the operation rows of pruned
// sagas, idempotency keys and the operator audit (s's). The ledger, the users and their
// wallets are never pruned (docs/ARCHITECTURE.md, Retention).
func (s *Service) RetentionTables(outbox *OutboxStore, w RetentionWindows) []retention.Table {
	return []retention.Table{
		{Name: "wallet_events", Window: w.Outbox, Prune: outbox.PrunePublished, Oldest: outbox.OldestPublished},
		{Name: "sagas", Window: w.Sagas, Prune: s.PruneSagas, Oldest: s.OldestFinishedSaga},
		{Name: "wallet_operations", Window: w.Operations, Prune: s.PruneOperations, Oldest: s.OldestPrunedOperation},
		{Name: "idempotency_keys", Window: w.IdempotencyKeys, Prune: s.PruneIdempotencyKeys, Oldest: s.OldestIdempotencyKey},
		{Name: "audit", Window: w.Audit, Prune: s.PruneAudit, Oldest: s.OldestAudit},
	}
}
