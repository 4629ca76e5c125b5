-- Update saga: a runner's update of its saga @id, queued in the commit's batch: @state, its
-- position (@step, @phase, @attempts), @data, its error (@error_code, @error_message) when
-- @set_error, else kept; step_since restarts when @new_position; due in @due_secs seconds;
-- the lease kept when @keep; and its whole step history as the commit leaves it (@history:
-- the runner holds the saga, so the history it read at its claim and wrote since is the
-- saga's).
--
-- It is fenced: when the saga's fence is no longer @fence, the one the runner holds (a
-- recovery runner claimed it after the lease expired), the update sets the fence to -1,
-- which the rule sagas_fence_held of the column's domain refuses, and the whole commit fails
-- (isFenceLost) before any of its other statements.
--
-- Locks: the sagas row @id.
UPDATE sagas SET state = @state, step = @step, phase = @phase, attempts = @attempts, data = @data,
    error_code = CASE WHEN @set_error::boolean THEN @error_code ELSE error_code END,
    error_message = CASE WHEN @set_error::boolean THEN @error_message ELSE error_message END,
    step_since = CASE WHEN @new_position::boolean THEN now() ELSE step_since END,
    next_run_at = now() + make_interval(secs => @due_secs),
    lease_owner = CASE WHEN @keep::boolean THEN lease_owner END,
    fence = CASE WHEN fence = @fence::bigint THEN fence ELSE -1 END,
    history = @history::jsonb,
    updated_at = now()
WHERE id = @id
RETURNING created_at, updated_at, step_since
