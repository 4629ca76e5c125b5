package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walletsaga/walletsaga/internal/metrics"
	"github.com/walletsaga/walletsaga/internal/retention"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

// newPruner is walletsvc's pruner: published outbox rows (the wallet's), finished sagas (the
// engine's, through its API, with the wallet's operation rows marked in the same
// transaction), the operation rows of pruned sagas, idempotency keys and the operator audit
// (the wallet's), each by its owner's statement. The ledger, the users and their wallets are
// never pruned (docs/ARCHITECTURE.md, Retention). Every replica runs one; their batches skip
// each other's locked rows.
func newPruner(cfg config, log *slog.Logger, reg prometheus.Registerer, outbox *wallet.OutboxStore, svc *wallet.Service) (*retention.Pruner, error) {
	tables := []retention.Table{
		{Name: "wallet_events", Window: cfg.RetentionOutbox, Prune: outbox.PrunePublished, Oldest: outbox.OldestPublished},
		{Name: "sagas", Window: cfg.RetentionSagas, Prune: svc.PruneSagas, Oldest: svc.OldestFinishedSaga},
		{Name: "wallet_operations", Window: cfg.RetentionOperations, Prune: svc.PruneOperations, Oldest: svc.OldestPrunedOperation},
		{Name: "idempotency_keys", Window: cfg.RetentionIdempotency, Prune: svc.PruneIdempotencyKeys, Oldest: svc.OldestIdempotencyKey},
		{Name: "audit", Window: cfg.RetentionAudit, Prune: svc.PruneAudit, Oldest: svc.OldestAudit},
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Name
	}
	return retention.New(retention.Config{Batch: cfg.RetentionBatch, Pause: cfg.RetentionPause,
		Logger: log.With("component", "retention"), Observer: metrics.NewRetention(reg, names...)}, tables...)
}
