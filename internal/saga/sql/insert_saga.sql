-- Insert saga: a new saga (Start's commit), queued in the commit's batch: @id (from
-- allocate_ids.sql), @kind, @state, @input, @data, its position (@step, @phase, @attempts),
-- its error (@error_code, @error_message, NULL for none), due in @due_secs seconds, leased to
-- @lease_owner (NULL: not kept) under @fence (its first, 1), the traceparent of the span that
-- started it (@traceparent, '' stores NULL), its key nonce (@key_nonce) and its step history
-- as the commit leaves it (@history, a JSON array: see the column in the migrations).
--
-- Locks: the new sagas row.
INSERT INTO sagas (id, kind, state, input, data, step, phase, attempts, error_code, error_message,
                   next_run_at, lease_owner, fence, step_since, traceparent, key_nonce, history)
VALUES (@id, @kind, @state, @input, @data, @step, @phase, @attempts, @error_code, @error_message, now() + make_interval(secs => @due_secs), @lease_owner, @fence::bigint, now(),
        NULLIF(@traceparent::text, ''), @key_nonce::uuid, @history::jsonb)
RETURNING created_at, updated_at, step_since
