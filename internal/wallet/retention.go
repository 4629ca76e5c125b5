package wallet

import (
	"context"
	"time"
)

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
