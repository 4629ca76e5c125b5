-- Prune published: delete up to @limit events published more than @window_us microseconds
-- ago, oldest first. An event not yet published is never deleted: the statement cannot
-- select one.
--
-- Locks: the deleted rows (FOR UPDATE SKIP LOCKED: rows others hold, another replica's
-- pruner or a mark in flight, are skipped).
DELETE FROM wallet_events WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM wallet_events
    WHERE published_at IS NOT NULL AND published_at < now() - @window_us::bigint * interval '1 microsecond'
    ORDER BY published_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED))
