package saga

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// All of the engine's SQL is in sql/*.sql, one statement a file, embedded here; this file
// runs them. listSQL is the one statement built in Go (see there why). A saga's step history
// is a column of its row (history, a JSON array of StepRecord, which pgx encodes and
// decodes): each commit writes the whole of it, as the runner that holds the saga keeps it.

var (
	//go:embed sql/allocate_ids.sql
	allocateIDsSQL string
	//go:embed sql/insert_saga.sql
	insertSagaSQL string
	//go:embed sql/update_saga.sql
	updateSagaSQL string
	//go:embed sql/claim_sagas.sql
	claimSagasSQL string
	//go:embed sql/lock_saga.sql
	lockSagaSQL string
	//go:embed sql/retry_saga.sql
	retrySagaSQL string
	//go:embed sql/resolve_saga.sql
	resolveSagaSQL string
	//go:embed sql/count_sagas.sql
	countSagasSQL string
	//go:embed sql/ended_sagas.sql
	endedSagasSQL string
	//go:embed sql/get_saga.sql
	getSagaSQL string
	//go:embed sql/prune_finished.sql
	pruneFinishedSQL string
	//go:embed sql/oldest_finished.sql
	oldestFinishedSQL string
)

// constraintFenceHeld is the rule (of sagas.fence's domain) a fenced update violates when the
// runner no longer holds the saga (see queueUpdate).
const constraintFenceHeld = "sagas_fence_held"

// isFenceLost reports whether err is a fenced update that found another runner's fence.
func isFenceLost(err error) bool {
	return pg.IsViolation(err, pgerrcode.CheckViolation, constraintFenceHeld)
}

// isTransient reports whether err is a deadlock or serialization failure: the same commit
// may simply be sent again.
func isTransient(err error) bool {
	return pg.IsCode(err, pgerrcode.DeadlockDetected, pgerrcode.SerializationFailure)
}

// allocateIDs takes n saga ids from the sagas' sequence in one round trip.
func allocateIDs(ctx context.Context, pool *pgxpool.Pool, n int) ([]int64, error) {
	rows, err := pool.Query(ctx, allocateIDsSQL, pg.Args{"n": n})
	if err != nil {
		return nil, fmt.Errorf("saga: allocate ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("saga: allocate ids: %w", err)
	}
	return ids, nil
}

// written is what a commit returned about the saga.
type written struct {
	CreatedAt, UpdatedAt, StepSince time.Time
}

// sagaWrite is the saga row one commit writes: the position it leaves the saga at, the data,
// the error (nil: keep), how long until it is due, and whether the runner keeps the lease.
type sagaWrite struct {
	ID          int64
	Kind        string
	Input       json.RawMessage
	Data        json.RawMessage
	To          position
	Err         *ErrorInfo
	NewPosition bool
	Due         time.Duration // until next_run_at: the lease when kept, the backoff otherwise
	Keep        bool
	Owner       string
	Fence       int64 // the fence the runner holds (Start: the saga's first, 1)
}

func (w sagaWrite) errCols() (set bool, code, msg *string) {
	if w.Err == nil {
		return false, nil, nil
	}
	return true, &w.Err.Code, &w.Err.Message
}

// historyArg is the @history argument of steps: never NULL (the column is NOT NULL), an
// empty array when there is none yet.
func historyArg(steps []StepRecord) []StepRecord {
	if steps == nil {
		return []StepRecord{}
	}
	return steps
}

// queueInsert queues the insert of a new saga (Start's commit), with the traceparent of the
// span that started it ("" stores NULL), its nonce, and its history as the commit leaves it.
func queueInsert(b *pgx.Batch, w sagaWrite, history []StepRecord, traceparent string, nonce pgtype.UUID, out *written) {
	_, code, msg := w.errCols()
	var owner *string
	if w.Keep {
		owner = &w.Owner
	}
	b.Queue(insertSagaSQL, pg.Args{
		"id": w.ID, "kind": w.Kind, "state": w.To.State, "input": w.Input, "data": w.Data,
		"step": w.To.Step, "phase": w.To.Phase, "attempts": w.To.Attempts, "error_code": code, "error_message": msg,
		"due_secs": w.Due.Seconds(), "lease_owner": owner, "fence": w.Fence, "traceparent": traceparent, "key_nonce": nonce,
		"history": historyArg(history),
	}).QueryRow(func(row pgx.Row) error { return row.Scan(&out.CreatedAt, &out.UpdatedAt, &out.StepSince) })
}

// queueUpdate queues a runner's update of its saga, with the saga's history as the commit
// leaves it. It is fenced: when the saga's fence is no longer the one the runner holds (a
// recovery runner claimed it after the lease expired), the update sets the fence to -1,
// which the rule sagas_fence_held of the column's domain refuses, and the whole commit fails
// (isFenceLost) before any of its other statements.
func queueUpdate(b *pgx.Batch, w sagaWrite, history []StepRecord, out *written) {
	set, code, msg := w.errCols()
	b.Queue(updateSagaSQL, pg.Args{
		"id": w.ID, "fence": w.Fence, "state": w.To.State, "step": w.To.Step, "phase": w.To.Phase,
		"attempts": w.To.Attempts, "data": w.Data, "set_error": set, "error_code": code, "error_message": msg,
		"new_position": w.NewPosition, "due_secs": w.Due.Seconds(), "keep": w.Keep, "history": historyArg(history),
	}).QueryRow(func(row pgx.Row) error { return row.Scan(&out.CreatedAt, &out.UpdatedAt, &out.StepSince) })
}

// claimed is a saga a recovery runner took over.
type claimed struct {
	position
	ID        int64
	Kind      string
	Input     json.RawMessage
	Data      json.RawMessage
	Fence     int64
	StepSince time.Time
	Err       *ErrorInfo
	// Traceparent is the span that started the saga ("" untraced): the recovery run links to it.
	Traceparent string
	// Nonce is the saga's key nonce (not Valid: created before it existed, see keyPrefix).
	Nonce pgtype.UUID
	// History is the saga's step history, its open record counting the claimed attempt.
	History []StepRecord
}

// claimSagas leases to owner up to limit sagas of the given kinds that are due (backoff over)
// or whose lease expired, skipping rows others hold locked and the ids in exclude: a new
// fence each, and the attempt they are about to make counted.
func claimSagas(ctx context.Context, pool *pgxpool.Pool, owner string, lease time.Duration, kinds []string, exclude []int64, limit int) ([]claimed, error) {
	rows, err := pool.Query(ctx, claimSagasSQL, pg.Args{
		"owner": owner, "lease_secs": lease.Seconds(), "kinds": kinds, "exclude": exclude, "limit": limit,
	})
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		var code, msg *string
		err := row.Scan(&c.ID, &c.Kind, &c.State, &c.Step, &c.Phase, &c.Attempts, &c.Input, &c.Data, &c.Fence, &c.StepSince, &code, &msg, &c.Traceparent, &c.Nonce, &c.History)
		c.Err = errorInfo(code, msg)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	return out, nil
}

func errorInfo(code, msg *string) *ErrorInfo {
	if code == nil && msg == nil {
		return nil
	}
	var e ErrorInfo
	if code != nil {
		e.Code = *code
	}
	if msg != nil {
		e.Message = *msg
	}
	return &e
}

// retrySaga sends a saga in NeedsAttention back to work on its current step with a fresh
// window, restoring the failure that started the compensation as its error.
func retrySaga(ctx context.Context, tx pgx.Tx, id int64) error {
	var state State
	err := tx.QueryRow(ctx, lockSagaSQL, pg.Args{"id": id}).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("saga: retry: %w", err)
	}
	if state != NeedsAttention {
		return fmt.Errorf("%w (state %s)", ErrNotRetryable, state)
	}
	_, err = tx.Exec(ctx, retrySagaSQL, pg.Args{"id": id})
	if err != nil {
		return fmt.Errorf("saga: retry: %w", err)
	}
	return nil
}

// resolveSaga marks a saga in NeedsAttention resolved.
func resolveSaga(ctx context.Context, tx pgx.Tx, id int64) error {
	var state State
	err := tx.QueryRow(ctx, lockSagaSQL, pg.Args{"id": id}).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("saga: resolve: %w", err)
	}
	if state != NeedsAttention {
		return fmt.Errorf("%w (state %s)", ErrNotRetryable, state)
	}
	if _, err := tx.Exec(ctx, resolveSagaSQL, pg.Args{"id": id}); err != nil {
		return fmt.Errorf("saga: resolve: %w", err)
	}
	return nil
}

// countSagas counts sagas by kind and state (an index-only scan of sagas_state_id_idx, which includes kind).
func countSagas(ctx context.Context, pool *pgxpool.Pool) ([]KindStateCount, error) {
	rows, err := pool.Query(ctx, countSagasSQL)
	if err != nil {
		return nil, fmt.Errorf("saga: count: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[KindStateCount])
	if err != nil {
		return nil, fmt.Errorf("saga: count: %w", err)
	}
	return out, nil
}

// endedSagas returns those of ids that are in a terminal state or do not exist.
func endedSagas(ctx context.Context, pool *pgxpool.Pool, ids []int64) ([]int64, error) {
	rows, err := pool.Query(ctx, endedSagasSQL, pg.Args{"ids": ids})
	if err != nil {
		return nil, fmt.Errorf("saga: re-check: %w", err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("saga: re-check: %w", err)
	}
	return ended, nil
}

// listSagas reads the sagas f selects (see ListFilter), newest first, without input, data
// and history. A NULL parameter switches its filter off.
// listSQL is List's statement for f: only the filters given are in it. A catch-all
// ($n IS NULL OR …) would let a generic plan walk every saga by id to find a page of one
// state, where this statement reads sagas_state_id_idx backwards from the cursor. So it is
// the one statement of the engine built in Go rather than read from sql/ (the SQL literal
// scan allows it by name).
func listSQL(f ListFilter) (string, pg.Args) {
	where, args := []string{"true"}, pg.Args{"limit": f.Limit}
	if f.IDs != nil {
		where, args["ids"] = append(where, "id = ANY(@ids)"), f.IDs
	}
	if len(f.Kinds) > 0 {
		where, args["kinds"] = append(where, "kind = ANY(@kinds)"), f.Kinds
	}
	if f.State != "" {
		where, args["state"] = append(where, "state = @state"), string(f.State)
	}
	if f.Before > 0 {
		where, args["before"] = append(where, "id < @before"), f.Before
	}
	return `SELECT id, kind, key_nonce, state, error_code, error_message, created_at, updated_at
		FROM sagas
		WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY id DESC
		LIMIT @limit`, args
}

func listSagas(ctx context.Context, pool *pgxpool.Pool, f ListFilter) ([]Snapshot, error) {
	query, args := listSQL(f)
	rows, err := pool.Query(ctx, query, args)
	if err != nil {
		return nil, fmt.Errorf("saga: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Snapshot, error) {
		var s Snapshot
		var code, msg *string
		var nonce pgtype.UUID
		err := row.Scan(&s.ID, &s.Kind, &nonce, &s.State, &code, &msg, &s.CreatedAt, &s.UpdatedAt)
		s.Error, s.KeyPrefix = errorInfo(code, msg), keyPrefix(s.ID, nonce)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("saga: list: %w", err)
	}
	return out, nil
}

// snapshot reads a saga, with its history.
func snapshot(ctx context.Context, pool *pgxpool.Pool, id int64) (Snapshot, error) {
	var s Snapshot
	var code, msg *string
	var nonce pgtype.UUID
	err := pool.QueryRow(ctx, getSagaSQL, pg.Args{"id": id}).Scan(&s.ID, &s.Kind, &nonce, &s.State, &s.Input, &s.Data, &code, &msg, &s.CreatedAt, &s.UpdatedAt, &s.Steps)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("saga: get: %w", err)
	}
	s.Error, s.KeyPrefix = errorInfo(code, msg), keyPrefix(s.ID, nonce)
	return s, nil
}

// pruneFinished deletes up to limit sagas that finished more than window ago, oldest first
// (their history with them: it is in their rows), skipping sagas others hold locked, and
// tells pruned their ids in the same transaction.
func pruneFinished(ctx context.Context, pool *pgxpool.Pool, window time.Duration, limit int, pruned Pruned) (int64, error) {
	var n int64
	err := pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, pruneFinishedSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		n = int64(len(ids))
		if pruned == nil || len(ids) == 0 {
			return nil
		}
		return pruned(ctx, tx, ids)
	})
	if err != nil {
		return 0, fmt.Errorf("saga: prune: %w", err)
	}
	return n, nil
}

// oldestFinished returns how long ago the oldest finished saga still kept finished (0 when
// none is).
func oldestFinished(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	d, err := pg.Age(ctx, pool, oldestFinishedSQL)
	if err != nil {
		return 0, fmt.Errorf("saga: oldest finished: %w", err)
	}
	return d, nil
}
