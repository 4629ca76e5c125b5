-- Prune operations: delete up to @limit of the wallet's rows whose saga was pruned more than
-- @window_us microseconds ago, oldest first. The row of a kept saga is never deleted: the
-- statement cannot select one.
--
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED: rows others hold are skipped).
DELETE FROM wallet_operations WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM wallet_operations
    WHERE pruned_at < now() - @window_us::bigint * interval '1 microsecond'
    ORDER BY pruned_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED))
