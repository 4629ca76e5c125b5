package wallet

import "context"

// ListUserSagasInChunks is ListSagas for f.UserID (which must exist), reading chunk of the
// user's operations at a time: a test can make the chunks small.
func (s *Service) ListUserSagasInChunks(ctx context.Context, f SagaFilter, chunk int) (SagaPage, error) {
	return s.listUserSagas(ctx, f, chunk)
}

// SameDatabase is sameDatabase, for its table test.
var SameDatabase = sameDatabase
