package saga

import (
	"context"
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

// All of the engine's SQL lives in this file.

// constraintFenceHeld is the CHECK constraint a fenced update violates when the runner no
// longer holds the saga (see queueUpdate).
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
	rows, err := pool.Query(ctx, `SELECT nextval(pg_get_serial_sequence('sagas', 'id')) FROM generate_series(1, $1)`, n)
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

// stepsSQL is the part of a saga's statement that writes the history of one commit (after
// the CTE s, the saga's own insert or update): the first record updates the open (pending)
// row of its step and phase if there is one, and every other record is a new row, numbered
// after the saga's last. Its parameters are $14..$20, after the saga's 13.
const stepsSQL = `
, r AS (
    SELECT * FROM unnest($14::int[], $15::text[], $16::text[], $17::text[], $18::int[], $19::text[], $20::text[])
        WITH ORDINALITY AS r(step, name, phase, status, attempts, error_code, error_message, ord)
), upd AS (
    UPDATE saga_steps st SET status = r.status, attempts = r.attempts,
        error_code = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_code, st.error_code) END,
        error_message = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_message, st.error_message) END,
        finished_at = CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r
    WHERE r.ord = 1 AND st.saga_id = $1 AND st.step = r.step AND st.phase = r.phase AND st.status = 'pending'
    RETURNING 1
), base AS (
    SELECT COALESCE(max(seq), 0) AS last FROM saga_steps WHERE saga_id = $1
), ins AS (
    INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts, error_code, error_message, finished_at)
    SELECT $1, base.last + row_number() OVER (ORDER BY r.ord), r.step, r.name, r.phase, r.status, r.attempts,
        r.error_code, r.error_message, CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r, base
    WHERE NOT (r.ord = 1 AND EXISTS (SELECT 1 FROM upd))
)
SELECT created_at, updated_at, step_since FROM s`

// stepArgs are the history parameters of stepsSQL, $14..$20.
func stepArgs(recs []stepWrite) []any {
	n := len(recs)
	steps, names, phases, statuses := make([]int32, n), make([]string, n), make([]string, n), make([]string, n)
	attempts := make([]int32, n)
	codes, msgs := make([]*string, n), make([]*string, n)
	for i, r := range recs {
		steps[i], names[i], phases[i], statuses[i], attempts[i] = int32(r.Step), r.Name, r.Phase, r.Status, int32(r.Attempts) //nolint:gosec // G115: integer columns; a saga has a few steps and its window stops attempts far below 2^31
		if r.Err != nil {
			codes[i], msgs[i] = &r.Err.Code, &r.Err.Message
		}
	}
	return []any{steps, names, phases, statuses, attempts, codes, msgs}
}

// withSteps appends the history parameters to the saga's 13.
func withSteps(args []any, recs []stepWrite) []any {
	if len(args) != 13 {
		panic(fmt.Sprintf("saga: %d saga parameters before the history's", len(args)))
	}
	return append(args, stepArgs(recs)...)
}

// queueInsert queues, as one statement, the insert of a new saga (Start's commit), with the
// traceparent of the span that started it ("" stores NULL), its nonce, and the history of
// its first commit.
func queueInsert(b *pgx.Batch, w sagaWrite, recs []stepWrite, traceparent string, nonce pgtype.UUID, out *written) {
	_, code, msg := w.errCols()
	var owner *string
	if w.Keep {
		owner = &w.Owner
	}
	b.Queue(`
WITH s AS (
    INSERT INTO sagas (id, kind, state, input, data, step, phase, attempts, error_code, error_message,
                       next_run_at, lease_owner, fence, step_since, traceparent, key_nonce)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + make_interval(secs => $11), $12, $13::bigint, now(),
            NULLIF($21::text, ''), $22::uuid)
    RETURNING created_at, updated_at, step_since
)`+stepsSQL,
		append(withSteps([]any{w.ID, w.Kind, w.To.State, w.Input, w.Data, w.To.Step, w.To.Phase, w.To.Attempts, code, msg,
			w.Due.Seconds(), owner, w.Fence}, recs), traceparent, nonce)...,
	).QueryRow(func(row pgx.Row) error { return row.Scan(&out.CreatedAt, &out.UpdatedAt, &out.StepSince) })
}

// queueUpdate queues, as one statement, a runner's update of its saga and the history of the
// commit. It is fenced: when the saga's fence is no longer the one the runner holds (a
// recovery runner claimed it after the lease expired), the update sets the fence to -1,
// which the CHECK constraint sagas_fence_held refuses, and the whole commit fails
// (isFenceLost) before any of its other statements.
func queueUpdate(b *pgx.Batch, w sagaWrite, recs []stepWrite, out *written) {
	set, code, msg := w.errCols()
	b.Queue(`
WITH s AS (
    UPDATE sagas SET state = $3, step = $4, phase = $5, attempts = $6, data = $7,
        error_code = CASE WHEN $8::boolean THEN $9 ELSE error_code END,
        error_message = CASE WHEN $8::boolean THEN $10 ELSE error_message END,
        step_since = CASE WHEN $11::boolean THEN now() ELSE step_since END,
        next_run_at = now() + make_interval(secs => $12),
        lease_owner = CASE WHEN $13::boolean THEN lease_owner END,
        fence = CASE WHEN fence = $2::bigint THEN fence ELSE -1 END,
        updated_at = now()
    WHERE id = $1
    RETURNING created_at, updated_at, step_since
)`+stepsSQL,
		withSteps([]any{w.ID, w.Fence, w.To.State, w.To.Step, w.To.Phase, w.To.Attempts, w.Data, set, code, msg,
			w.NewPosition, w.Due.Seconds(), w.Keep}, recs)...,
	).QueryRow(func(row pgx.Row) error { return row.Scan(&out.CreatedAt, &out.UpdatedAt, &out.StepSince) })
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
}

// claimSagas leases to owner up to limit sagas of the given kinds that are due (backoff over)
// or whose lease expired, skipping rows others hold locked and the ids in exclude: a new
// fence each, and the attempt they are about to make counted.
func claimSagas(ctx context.Context, pool *pgxpool.Pool, owner string, lease time.Duration, kinds []string, exclude []int64, limit int) ([]claimed, error) {
	rows, err := pool.Query(ctx, `
WITH due AS (
    SELECT id FROM sagas
    WHERE state IN ('running', 'compensating') AND next_run_at <= now()
      AND kind = ANY($3) AND id <> ALL($4)
    ORDER BY next_run_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), c AS (
    UPDATE sagas s SET lease_owner = $1, next_run_at = now() + make_interval(secs => $2),
        fence = s.fence + 1, attempts = s.attempts + 1, updated_at = now()
    FROM due WHERE s.id = due.id
    RETURNING s.id, s.kind, s.state, s.step, s.phase, s.attempts, s.input, s.data, s.fence, s.step_since,
        s.error_code, s.error_message, COALESCE(s.traceparent, ''), s.key_nonce
), h AS (
    UPDATE saga_steps st SET attempts = c.attempts
    FROM c WHERE st.saga_id = c.id AND st.step = c.step AND st.phase = c.phase AND st.status = 'pending'
)
SELECT * FROM c`, owner, lease.Seconds(), kinds, exclude, limit)
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		var code, msg *string
		err := row.Scan(&c.ID, &c.Kind, &c.State, &c.Step, &c.Phase, &c.Attempts, &c.Input, &c.Data, &c.Fence, &c.StepSince, &code, &msg, &c.Traceparent, &c.Nonce)
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
	err := tx.QueryRow(ctx, `SELECT state FROM sagas WHERE id = $1 FOR UPDATE`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("saga: retry: %w", err)
	}
	if state != NeedsAttention {
		return fmt.Errorf("%w (state %s)", ErrNotRetryable, state)
	}
	_, err = tx.Exec(ctx, `
		WITH f AS (
			SELECT error_code, error_message FROM saga_steps
			WHERE saga_id = $1 AND phase = 'forward' AND status = 'failed'
			ORDER BY seq DESC LIMIT 1
		)
		UPDATE sagas SET
			state = CASE WHEN phase = 'forward' THEN 'running' ELSE 'compensating' END,
			attempts = 0, next_run_at = now(), step_since = now(), lease_owner = NULL, updated_at = now(),
			error_code = COALESCE((SELECT error_code FROM f), error_code),
			error_message = COALESCE((SELECT error_message FROM f), error_message)
		WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("saga: retry: %w", err)
	}
	return nil
}

// resolveSaga marks a saga in NeedsAttention resolved.
func resolveSaga(ctx context.Context, tx pgx.Tx, id int64) error {
	var state State
	err := tx.QueryRow(ctx, `SELECT state FROM sagas WHERE id = $1 FOR UPDATE`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("saga: resolve: %w", err)
	}
	if state != NeedsAttention {
		return fmt.Errorf("%w (state %s)", ErrNotRetryable, state)
	}
	if _, err := tx.Exec(ctx, `UPDATE sagas SET state = 'resolved', lease_owner = NULL, updated_at = now()
		WHERE id = $1`, id); err != nil {
		return fmt.Errorf("saga: resolve: %w", err)
	}
	return nil
}

// countSagas counts sagas by kind and state (an index-only scan of sagas_kind_state_created_idx).
func countSagas(ctx context.Context, pool *pgxpool.Pool) ([]KindStateCount, error) {
	rows, err := pool.Query(ctx, `SELECT kind, state, count(*) FROM sagas GROUP BY kind, state ORDER BY kind, state`)
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
	rows, err := pool.Query(ctx, `
		SELECT w.id FROM unnest($1::bigint[]) AS w(id)
		WHERE NOT EXISTS (SELECT 1 FROM sagas s WHERE s.id = w.id AND s.state IN ('running', 'compensating'))`, ids)
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
// state, where this statement reads sagas_state_id_idx backwards from the cursor.
func listSQL(f ListFilter) (string, pgx.NamedArgs) {
	where, args := []string{"true"}, pgx.NamedArgs{"limit": f.Limit}
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

// snapshot reads a saga and its history.
func snapshot(ctx context.Context, pool *pgxpool.Pool, id int64) (Snapshot, error) {
	var s Snapshot
	var code, msg *string
	var nonce pgtype.UUID
	err := pool.QueryRow(ctx, `SELECT id, kind, key_nonce, state, input, data, error_code, error_message, created_at, updated_at
		FROM sagas WHERE id = $1`, id).Scan(&s.ID, &s.Kind, &nonce, &s.State, &s.Input, &s.Data, &code, &msg, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("saga: get: %w", err)
	}
	s.Error, s.KeyPrefix = errorInfo(code, msg), keyPrefix(s.ID, nonce)
	rows, err := pool.Query(ctx, `SELECT name, phase, status, attempts, error_code, error_message
		FROM saga_steps WHERE saga_id = $1 ORDER BY seq`, id)
	if err != nil {
		return s, fmt.Errorf("saga: get steps: %w", err)
	}
	s.Steps, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (StepRecord, error) {
		var r StepRecord
		var code, msg *string
		err := row.Scan(&r.Name, &r.Phase, &r.Status, &r.Attempts, &code, &msg)
		r.Error = errorInfo(code, msg)
		return r, err
	})
	if err != nil {
		return s, fmt.Errorf("saga: get steps: %w", err)
	}
	return s, nil
}

// finishedStates are the states whose sagas retention may prune: over, and needing nobody.
// A saga in needs_attention waits for an operator and is kept, whatever its age.
const finishedStates = `('completed', 'compensated', 'failed', 'resolved')`

// pruneFinished deletes up to limit sagas that finished more than window ago, oldest first,
// with their history (saga_steps, ON DELETE CASCADE), skipping sagas others hold locked, and
// tells pruned their ids in the same transaction.
func pruneFinished(ctx context.Context, pool *pgxpool.Pool, window time.Duration, limit int, pruned Pruned) (int64, error) {
	var n int64
	err := pg.WithTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
DELETE FROM sagas WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM sagas
    WHERE state IN `+finishedStates+` AND updated_at < now() - $1::bigint * interval '1 microsecond'
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
RETURNING id`, window.Microseconds(), limit)
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
	d, err := pg.Age(ctx, pool, `SELECT EXTRACT(EPOCH FROM now() - min(updated_at))::float8 FROM sagas
		WHERE state IN `+finishedStates)
	if err != nil {
		return 0, fmt.Errorf("saga: oldest finished: %w", err)
	}
	return d, nil
}
