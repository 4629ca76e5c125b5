package wallet

import (
	"context"
	"time"
)

// Retention (docs/ARCHITECTURE.md, Retention): the wallet prunes its own tables; the saga
// engine prunes its own through PruneSagas. The ledger is never pruned: a balance is the sum
// of its entries.

// PruneSagas deletes up to limit sagas that finished more than window ago, through the saga
// engine (saga.Engine.Prune, which never deletes a saga that runs, compensates or waits for
// an operator), and in the same transaction marks their operation rows pruned: from that
// commit on, such a saga's id answers gone (GetSaga, WaitSaga) and no user's list reads its
// row. It returns how many sagas it deleted.
func (s *Service) PruneSagas(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return s.engine.Prune(ctx, window, limit, markOperationsPruned)
}

// OldestFinishedSaga returns how long ago the oldest finished saga still kept finished.
func (s *Service) OldestFinishedSaga(ctx context.Context) (time.Duration, error) {
	return s.engine.OldestFinished(ctx)
}

// PruneOperations deletes up to limit operation rows whose saga was pruned more than window
// ago, oldest first; after that the saga's id answers not found, as one that never was.
func (s *Service) PruneOperations(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return pruneOperations(ctx, s.pool, window, limit)
}

// OldestPrunedOperation returns how long ago the saga of the oldest operation row still kept
// was pruned (0 when none is).
func (s *Service) OldestPrunedOperation(ctx context.Context) (time.Duration, error) {
	return age(ctx, s.pool, oldestPrunedOperationSQL)
}

// PruneIdempotencyKeys deletes up to limit Idempotency-Keys taken more than window ago,
// oldest first, skipping keys others hold locked, and returns how many it deleted. A request
// that comes back after its key was pruned is a new request: it starts a saga of its own.
func (s *Service) PruneIdempotencyKeys(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return pruneIdempotencyKeys(ctx, s.pool, window, limit)
}

// OldestIdempotencyKey returns the age of the oldest Idempotency-Key kept (0 when none is).
func (s *Service) OldestIdempotencyKey(ctx context.Context) (time.Duration, error) {
	return age(ctx, s.pool, oldestIdempotencyKeySQL)
}

// PruneAudit deletes up to limit operator audit rows recorded more than window ago whose saga
// is no longer kept, oldest first. The trail of a saga still kept is never deleted.
func (s *Service) PruneAudit(ctx context.Context, window time.Duration, limit int) (int64, error) {
	return pruneAudit(ctx, s.pool, window, limit)
}

// OldestAudit returns the age of the oldest audit row of a saga no longer kept (0 when none).
func (s *Service) OldestAudit(ctx context.Context) (time.Duration, error) {
	return age(ctx, s.pool, oldestAuditSQL)
}
