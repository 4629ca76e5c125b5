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
-- The history of the commit follows: saga_history.sql, which store.go appends.
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
