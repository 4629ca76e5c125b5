package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// All of the engine's SQL lives in this file.

// withTx runs fn in a transaction and commits it; on any error it rolls back with a fresh
// context, so a cancelled ctx still ends the transaction cleanly.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) (err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("saga: begin: %w", err)
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = tx.Rollback(rctx)
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("saga: commit: %w", err)
	}
	return nil
}

// sagaRow is a row of sagas.
type sagaRow struct {
	position
	ID         int64
	Kind       string
	Input      json.RawMessage
	Data       json.RawMessage
	LeaseOwner *string
	Due        bool // next_run_at <= now()
	Err        *ErrorInfo
}

func (r *sagaRow) instance() *Instance {
	return &Instance{ID: r.ID, Kind: r.Kind, Input: r.Input, Data: r.Data}
}

const sagaColumns = `id, kind, state, step, phase, attempts, input, data, lease_owner,
	next_run_at <= now(), error_code, error_message`

func scanSaga(row pgx.Row) (sagaRow, error) {
	var r sagaRow
	var code, msg *string
	err := row.Scan(&r.ID, &r.Kind, &r.State, &r.Step, &r.Phase, &r.Attempts, &r.Input, &r.Data,
		&r.LeaseOwner, &r.Due, &code, &msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("saga: load: %w", err)
	}
	r.Err = errorInfo(code, msg)
	return r, nil
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

// insertSaga adds a running saga, due now, and wakes runners once tx commits.
func insertSaga(ctx context.Context, tx pgx.Tx, kind string, input []byte) (int64, error) {
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO sagas (kind, input) VALUES ($1, $2) RETURNING id`, kind, input).Scan(&id); err != nil {
		return 0, fmt.Errorf("saga: insert: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify('saga_due', $1::bigint::text)`, id); err != nil {
		return 0, fmt.Errorf("saga: notify: %w", err)
	}
	return id, nil
}

// claimSagas leases up to limit due sagas of the given kinds to owner, skipping rows other
// runners hold and the ids in exclude (those this engine is already working on).
func claimSagas(ctx context.Context, pool *pgxpool.Pool, owner string, lease time.Duration, kinds []string, exclude []int64, limit int) ([]int64, error) {
	rows, err := pool.Query(ctx, `
		UPDATE sagas s SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
		FROM (
			SELECT id FROM sagas
			WHERE state IN ('running', 'compensating') AND next_run_at <= now()
			  AND (lease_until IS NULL OR lease_until < now())
			  AND kind = ANY($3) AND id <> ALL($4)
			ORDER BY next_run_at
			LIMIT $5
			FOR UPDATE SKIP LOCKED
		) due
		WHERE s.id = due.id
		RETURNING s.id`, owner, lease.Seconds(), kinds, exclude, limit)
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("saga: claim: %w", err)
	}
	return ids, nil
}

// loadSaga reads a saga from the pool or a transaction; with lock (in a transaction), it
// also locks the row until the transaction ends.
func loadSaga(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id int64, lock bool) (sagaRow, error) {
	sql := `SELECT ` + sagaColumns + ` FROM sagas WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	return scanSaga(q.QueryRow(ctx, sql, id))
}

// extendLease pushes owner's lease forward; false means owner no longer holds it.
func extendLease(ctx context.Context, pool *pgxpool.Pool, id int64, owner string, lease time.Duration) (bool, error) {
	tag, err := pool.Exec(ctx, `UPDATE sagas SET lease_until = now() + make_interval(secs => $3)
		WHERE id = $1 AND lease_owner = $2`, id, owner, lease.Seconds())
	if err != nil {
		return false, fmt.Errorf("saga: extend lease: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// releaseLease gives up owner's lease, if owner still holds it.
func releaseLease(ctx context.Context, pool *pgxpool.Pool, id int64, owner string) error {
	if _, err := pool.Exec(ctx, `UPDATE sagas SET lease_owner = NULL, lease_until = NULL
		WHERE id = $1 AND lease_owner = $2`, id, owner); err != nil {
		return fmt.Errorf("saga: release lease: %w", err)
	}
	return nil
}

// countAttempt records, before a remote call, that attempt number n of the current step
// has begun.
func countAttempt(ctx context.Context, tx pgx.Tx, r *sagaRow, name string, n int) error {
	if _, err := tx.Exec(ctx, `UPDATE sagas SET attempts = $2, updated_at = now() WHERE id = $1`, r.ID, n); err != nil {
		return fmt.Errorf("saga: count attempt: %w", err)
	}
	return writeStep(ctx, tx, r.ID, stepWrite{Step: r.Step, Name: name, Phase: r.Phase, Status: statusPending, Attempts: n})
}

// writeStep updates the open history row of the step and phase, or starts a new one.
func writeStep(ctx context.Context, tx pgx.Tx, id int64, w stepWrite) error {
	var code, msg *string
	if w.Err != nil {
		code, msg = &w.Err.Code, &w.Err.Message
	}
	_, err := tx.Exec(ctx, `
		WITH upd AS (
			UPDATE saga_steps SET status = $5, attempts = $6,
				error_code = CASE WHEN $5 = 'done' THEN NULL ELSE COALESCE($7, error_code) END,
				error_message = CASE WHEN $5 = 'done' THEN NULL ELSE COALESCE($8, error_message) END,
				finished_at = CASE WHEN $5 = 'pending' THEN NULL ELSE now() END
			WHERE saga_id = $1 AND step = $2 AND phase = $4 AND status = 'pending'
			RETURNING 1
		)
		INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts, error_code, error_message, finished_at)
		SELECT $1, COALESCE((SELECT max(seq) FROM saga_steps WHERE saga_id = $1), 0) + 1,
			$2, $3, $4, $5, $6, $7, $8, CASE WHEN $5 = 'pending' THEN NULL ELSE now() END
		WHERE NOT EXISTS (SELECT 1 FROM upd)`,
		id, w.Step, w.Name, w.Phase, w.Status, w.Attempts, code, msg)
	if err != nil {
		return fmt.Errorf("saga: write step %q: %w", w.Name, err)
	}
	return nil
}

// applyTransition writes t to the saga (locked by tx) with data, and its history. With
// keep, owner keeps the lease (extended); otherwise the lease is released. A terminal
// state notifies saga_done on commit.
func applyTransition(ctx context.Context, tx pgx.Tx, id int64, t transition, data json.RawMessage, keep bool, lease time.Duration) error {
	for _, w := range t.Records {
		if err := writeStep(ctx, tx, id, w); err != nil {
			return err
		}
	}
	var code, msg *string
	if t.Err != nil {
		code, msg = &t.Err.Code, &t.Err.Message
	}
	_, err := tx.Exec(ctx, `
		UPDATE sagas SET state = $2, step = $3, phase = $4, attempts = $5,
			next_run_at = now() + make_interval(secs => $6), data = $7,
			error_code = CASE WHEN $8 THEN $9 ELSE error_code END,
			error_message = CASE WHEN $8 THEN $10 ELSE error_message END,
			lease_owner = CASE WHEN $11 THEN lease_owner END,
			lease_until = CASE WHEN $11 THEN now() + make_interval(secs => $12) END,
			updated_at = now()
		WHERE id = $1`,
		id, t.To.State, t.To.Step, t.To.Phase, t.To.Attempts, t.Delay.Seconds(), data,
		t.Err != nil, code, msg, keep, lease.Seconds())
	if err != nil {
		return fmt.Errorf("saga: update: %w", err)
	}
	if t.To.State.Terminal() {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('saga_done', $1::bigint::text)`, id); err != nil {
			return fmt.Errorf("saga: notify: %w", err)
		}
	}
	return nil
}

// retrySaga sends a saga in NeedsAttention back to work on its current step with fresh
// attempts, restoring the failure that started the compensation as its error.
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
			attempts = 0, next_run_at = now(), lease_owner = NULL, lease_until = NULL, updated_at = now(),
			error_code = COALESCE((SELECT error_code FROM f), error_code),
			error_message = COALESCE((SELECT error_message FROM f), error_message)
		WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("saga: retry: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify('saga_due', $1::bigint::text)`, id); err != nil {
		return fmt.Errorf("saga: notify: %w", err)
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
	if _, err := tx.Exec(ctx, `UPDATE sagas SET state = 'resolved', lease_owner = NULL, lease_until = NULL, updated_at = now()
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

// The notification channels: saga_due carries the id of a saga that became due (started or
// retried), saga_done that of a saga that reached a terminal state.
const (
	channelDue  = "saga_due"
	channelDone = "saga_done"
)

// listen opens a connection of its own (configured as the pool's connections, but outside
// the pool and its MaxConns) listening on both channels. The caller closes it.
func listen(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("saga: listen: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channelDue+"; LISTEN "+channelDone); err != nil {
		closeConn(ctx, conn)
		return nil, fmt.Errorf("saga: listen: %w", err)
	}
	return conn, nil
}

// closeConn closes c, with a fresh timeout so that a cancelled ctx still says goodbye.
func closeConn(ctx context.Context, c *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = c.Close(cctx)
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

// snapshot reads a saga and its history.
func snapshot(ctx context.Context, pool *pgxpool.Pool, id int64) (Snapshot, error) {
	var s Snapshot
	var code, msg *string
	err := pool.QueryRow(ctx, `SELECT id, kind, state, input, data, error_code, error_message, created_at, updated_at
		FROM sagas WHERE id = $1`, id).Scan(&s.ID, &s.Kind, &s.State, &s.Input, &s.Data, &code, &msg, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("saga: get: %w", err)
	}
	s.Error = errorInfo(code, msg)
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
