package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// newPruner is walletsvc's pruner: published outbox rows (the wallet's), finished sagas (the
// engine's, through its API, with the wallet's operation rows marked in the same
// transaction), the operation rows of pruned sagas, idempotency keys and the operator audit
// (the wallet's), each by its owner's statement. The ledger, the users and their wallets are
// never pruned (docs/ARCHITECTURE.md, Retention).
func newPruner(cfg config, log *slog.Logger, reg prometheus.Registerer, outbox *wallet.OutboxStore, svc *wallet.Service) (*retention.Pruner, error) {
	return cfg.NewPruner(log, reg,
		retention.Table{Name: "wallet_events", Window: cfg.RetentionOutbox, Prune: outbox.PrunePublished, Oldest: outbox.OldestPublished},
		retention.Table{Name: "sagas", Window: cfg.RetentionSagas, Prune: svc.PruneSagas, Oldest: svc.OldestFinishedSaga},
		retention.Table{Name: "wallet_operations", Window: cfg.RetentionOperations, Prune: svc.PruneOperations, Oldest: svc.OldestPrunedOperation},
		retention.Table{Name: "idempotency_keys", Window: cfg.RetentionIdempotency, Prune: svc.PruneIdempotencyKeys, Oldest: svc.OldestIdempotencyKey},
		retention.Table{Name: "audit", Window: cfg.RetentionAudit, Prune: svc.PruneAudit, Oldest: svc.OldestAudit},
	)
}
