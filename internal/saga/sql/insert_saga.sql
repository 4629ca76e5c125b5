-- Insert saga: a new saga (Start's commit) and the history of its first commit, as one
-- statement queued in the commit's batch. The saga row: @id (from allocate_ids.sql), @kind,
-- @state, @input, @data, its position (@step, @phase, @attempts), its error (@error_code,
-- @error_message, NULL for none), due in @due_secs seconds, leased to @lease_owner (NULL: not
-- kept) under @fence (its first, 1), the traceparent of the span that started it
-- (@traceparent, '' stores NULL) and its key nonce (@key_nonce).
--
-- The history of the commit follows: saga_history.sql, which store.go appends.
--
-- Locks: the new sagas row, and the saga_steps rows it updates or inserts.
WITH s AS (
    INSERT INTO sagas (id, kind, state, input, data, step, phase, attempts, error_code, error_message,
                       next_run_at, lease_owner, fence, step_since, traceparent, key_nonce)
    VALUES (@id, @kind, @state, @input, @data, @step, @phase, @attempts, @error_code, @error_message, now() + make_interval(secs => @due_secs), @lease_owner, @fence::bigint, now(),
            NULLIF(@traceparent::text, ''), @key_nonce::uuid)
    RETURNING created_at, updated_at, step_since
)
