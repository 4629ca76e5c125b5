-- Get saga: saga @id as Engine.Get shows it, with its step history. Locks nothing.
SELECT id, kind, key_nonce, state, input, data, error_code, error_message, created_at, updated_at, history
FROM sagas WHERE id = @id
