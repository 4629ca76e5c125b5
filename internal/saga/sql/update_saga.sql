-- Update saga: a runner's update of its saga @id and the history of the commit, as one
-- statement queued in the commit's batch. The saga row: @state, its position (@step, @phase,
-- @attempts), @data, its error (@error_code, @error_message) when @set_error, else kept;
-- step_since restarts when @new_position; due in @due_secs seconds; the lease kept when @keep.
--
-- It is fenced: when the saga's fence is no longer @fence, the one the runner holds (a
-- recovery runner claimed it after the lease expired), the update sets the fence to -1,
-- which the CHECK constraint sagas_fence_held refuses, and the whole commit fails
-- (isFenceLost) before any of its other statements.
--
-- The history (the same text as in insert_saga.sql): one element of the @step_* arrays per
-- record; the first record updates the open (pending) row of its step and phase if there is
-- one, and every other record is a new row, numbered after the saga's last.
--
-- Locks: the sagas row @id, and the saga_steps rows it updates or inserts.
WITH s AS (
    UPDATE sagas SET state = @state, step = @step, phase = @phase, attempts = @attempts, data = @data,
        error_code = CASE WHEN @set_error::boolean THEN @error_code ELSE error_code END,
        error_message = CASE WHEN @set_error::boolean THEN @error_message ELSE error_message END,
        step_since = CASE WHEN @new_position::boolean THEN now() ELSE step_since END,
        next_run_at = now() + make_interval(secs => @due_secs),
        lease_owner = CASE WHEN @keep::boolean THEN lease_owner END,
        fence = CASE WHEN fence = @fence::bigint THEN fence ELSE -1 END,
        updated_at = now()
    WHERE id = @id
    RETURNING created_at, updated_at, step_since
)
, r AS (
    SELECT * FROM unnest(@step_steps::int[], @step_names::text[], @step_phases::text[], @step_statuses::text[], @step_attempts::int[], @step_error_codes::text[], @step_error_messages::text[])
        WITH ORDINALITY AS r(step, name, phase, status, attempts, error_code, error_message, ord)
), upd AS (
    UPDATE saga_steps st SET status = r.status, attempts = r.attempts,
        error_code = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_code, st.error_code) END,
        error_message = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_message, st.error_message) END,
        finished_at = CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r
    WHERE r.ord = 1 AND st.saga_id = @id AND st.step = r.step AND st.phase = r.phase AND st.status = 'pending'
    RETURNING 1
), base AS (
    SELECT COALESCE(max(seq), 0) AS last FROM saga_steps WHERE saga_id = @id
), ins AS (
    INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts, error_code, error_message, finished_at)
    SELECT @id, base.last + row_number() OVER (ORDER BY r.ord), r.step, r.name, r.phase, r.status, r.attempts,
        r.error_code, r.error_message, CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r, base
    WHERE NOT (r.ord = 1 AND EXISTS (SELECT 1 FROM upd))
)
SELECT created_at, updated_at, step_since FROM s
