-- Oldest idempotency key: the age, in seconds, of the oldest idempotency key (NULL when
-- none). No arguments. Locks nothing.
SELECT EXTRACT(EPOCH FROM now() - min(created_at))::float8 FROM idempotency_keys
