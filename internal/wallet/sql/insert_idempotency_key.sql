-- Insert idempotency key: claim the key @key of user @user_id, for the request hashed
-- @request_hash, for saga @saga_id. A second request with the same key (concurrent or later)
-- fails on its primary key, idempotency_keys_pkey. Locks: the new row (the primary key's
-- entry).
INSERT INTO idempotency_keys (user_id, key, request_hash, saga_id) VALUES (@user_id, @key, @request_hash, @saga_id)
