-- Get idempotency key: the request hash and saga of the key @key of user @user_id (no row:
-- not taken). Locks nothing.
SELECT request_hash, saga_id FROM idempotency_keys WHERE user_id = @user_id AND key = @key
