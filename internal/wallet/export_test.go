package wallet

import "context"

// ListUserSagasInChunks is ListSagas for f.UserID (which must exist), reading first chunk of
// the user's operations (then growing batches, as ListSagas does): a test can make the
// chunks small.
func (s *Service) ListUserSagasInChunks(ctx context.Context, f SagaFilter, chunk int) (SagaPage, error) {
	page, _, err := s.listUserSagas(ctx, f, chunk, ListScanBudget)
	return page, err
}

// ListSagasCounted is ListSagas that also returns how many rows it read (the user's
// operations, or the engine's sagas), which ListScanBudget bounds.
func (s *Service) ListSagasCounted(ctx context.Context, f SagaFilter) (SagaPage, int, error) {
	return s.listSagas(ctx, f, userChunk, ListScanBudget)
}

// SameDatabase is sameDatabase, for its table test.
var SameDatabase = sameDatabase
