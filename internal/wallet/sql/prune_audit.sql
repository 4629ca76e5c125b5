-- Prune audit: delete up to @limit operator audit rows recorded more than @window_us
-- microseconds ago whose saga is no longer kept (its operation row is marked pruned, or
-- gone), oldest first. The trail of a saga still kept (one that waits for an operator,
-- however old) is never deleted.
--
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED: rows others hold are skipped).
DELETE FROM audit WHERE ctid = ANY(ARRAY(
    SELECT a.ctid FROM audit a
    WHERE a.at < now() - @window_us::bigint * interval '1 microsecond'
      AND NOT EXISTS (SELECT 1 FROM wallet_operations o WHERE o.saga_id = a.saga_id AND o.pruned_at IS NULL)
    ORDER BY a.at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED))
