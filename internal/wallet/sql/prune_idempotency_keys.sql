-- Prune idempotency keys: delete up to @limit idempotency keys taken more than @window_us
-- microseconds ago, oldest first. A request that comes back with a pruned key is a new
-- request.
--
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED: keys others hold are skipped).
DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM idempotency_keys
    WHERE created_at < now() - @window_us::bigint * interval '1 microsecond'
    ORDER BY created_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED))
