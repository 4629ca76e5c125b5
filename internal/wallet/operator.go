package wallet

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/saga"
)

// The audit actions of operator actions on sagas.
const (
	ActionRetrySaga   = "retry_saga"
	ActionResolveSaga = "resolve_saga"
)

// OperatorAction is who asks for an operator action and why; both are required.
type OperatorAction struct {
	Actor  string // at most MaxActorLen characters
	Reason string // at most MaxReasonLen characters
}

// The bounds of an operator action's actor and reason (httpx checks the same at the HTTP
// edge; these hold for every caller).
const (
	MaxActorLen  = 64
	MaxReasonLen = 500
)

// check requires an actor and a reason, both printable text: they are stored in the audit
// table and logged, and a NUL would otherwise reach Postgres (which refuses it in text) only
// after the action itself had run in the same transaction.
func (a OperatorAction) check() error {
	if a.Actor == "" {
		return apperr.New(apperr.Invalid, "an operator action needs an actor")
	}
	if a.Reason == "" {
		return apperr.New(apperr.Invalid, "an operator action needs a reason")
	}
	if err := validateText("actor", a.Actor, MaxActorLen); err != nil {
		return err
	}
	return validateText("reason", a.Reason, MaxReasonLen)
}

// AuditEntry is one recorded operator action.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	SagaID int64     `json:"saga_id"`
	Reason string    `json:"reason"`
}

// RetrySaga sends a saga in needs_attention back to work on the compensation that failed,
// with fresh attempts, and records the action in the audit table in the same transaction.
// Errors: Invalid, NotFound, Conflict (the saga does not need attention).
func (s *Service) RetrySaga(ctx context.Context, id int64, a OperatorAction) (Operation, error) {
	return s.operate(ctx, id, a, ActionRetrySaga, s.engine.RetryTx)
}

// ResolveSaga marks a saga in needs_attention resolved (terminal: an operator settled by hand
// what its failed compensation left), recording the action in the audit table in the same
// transaction. Errors: Invalid, NotFound, Conflict (the saga does not need attention).
func (s *Service) ResolveSaga(ctx context.Context, id int64, a OperatorAction) (Operation, error) {
	return s.operate(ctx, id, a, ActionResolveSaga, s.engine.ResolveTx)
}

func (s *Service) operate(ctx context.Context, id int64, a OperatorAction, action string,
	fn func(context.Context, pgx.Tx, int64) error,
) (Operation, error) {
	if err := ValidateID("saga id", id); err != nil {
		return Operation{}, err
	}
	if err := a.check(); err != nil {
		return Operation{}, err
	}
	if _, err := getOperation(ctx, s.pool, id); err != nil {
		return Operation{}, err
	}
	err := pg.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(ctx, tx, id); err != nil {
			return err
		}
		return insertAudit(ctx, tx, a, action, id, nil)
	})
	switch {
	case errors.Is(err, saga.ErrNotFound):
		return Operation{}, apperr.New(apperr.NotFound, "saga %d not found", id)
	case errors.Is(err, saga.ErrNotRetryable):
		op, gerr := s.GetSaga(ctx, id)
		if gerr != nil {
			return Operation{}, gerr
		}
		return Operation{}, apperr.New(apperr.Conflict, "saga %d is %s; only a saga in needs_attention can be retried or resolved", id, op.State)
	case err != nil:
		return Operation{}, fmt.Errorf("wallet: %s %d: %w", action, id, err)
	}
	s.log.InfoContext(ctx, "operator action", "action", action, "saga", id, "actor", a.Actor, "reason", a.Reason)
	return s.GetSaga(ctx, id)
}

var (
	//go:embed sql/insert_audit.sql
	insertAuditSQL string
	//go:embed sql/prune_audit.sql
	pruneAuditSQL string
	//go:embed sql/oldest_audit.sql
	oldestAuditSQL string
	//go:embed sql/saga_audit.sql
	sagaAuditSQL string
)

// insertAudit records an operator action in tx.
func insertAudit(ctx context.Context, tx pgx.Tx, a OperatorAction, action string, sagaID int64, detail any) error {
	var d []byte
	if detail != nil {
		var err error
		if d, err = json.Marshal(detail); err != nil {
			return fmt.Errorf("wallet: audit detail: %w", err)
		}
	}
	_, err := tx.Exec(ctx, insertAuditSQL, pg.Args{
		"actor": a.Actor, "action": action, "saga_id": sagaID, "reason": a.Reason, "detail": d,
	})
	if err != nil {
		return fmt.Errorf("wallet: audit: %w", err)
	}
	return nil
}

// pruneAudit deletes up to limit operator audit rows recorded more than window ago whose
// saga is no longer kept (its operation row is marked pruned, or gone), oldest first,
// skipping rows others hold locked. The trail of a saga still kept (one that waits for an
// operator, however old) is never deleted.
func pruneAudit(ctx context.Context, q querier, window time.Duration, limit int) (int64, error) {
	tag, err := q.Exec(ctx, pruneAuditSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("wallet: prune audit: %w", err)
	}
	return tag.RowsAffected(), nil
}

// SagaAudit returns the operator actions recorded on a saga, oldest first.
func (s *Service) SagaAudit(ctx context.Context, id int64) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, sagaAuditSQL, pg.Args{"saga_id": id})
	if err != nil {
		return nil, fmt.Errorf("wallet: audit of saga %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("wallet: audit of saga %d: %w", id, err)
	}
	return out, nil
}
