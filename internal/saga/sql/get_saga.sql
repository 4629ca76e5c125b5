-- Get saga: saga @id as Engine.Get shows it, without its history (get_saga_steps.sql).
-- Locks nothing.
SELECT id, kind, key_nonce, state, input, data, error_code, error_message, created_at, updated_at
FROM sagas WHERE id = @id
