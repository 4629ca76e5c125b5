-- Prune finished: delete up to @limit sagas that finished (completed, compensated, failed or
-- resolved) more than @window_us microseconds ago, oldest first (their history is in their
-- rows), and return their ids. A saga in needs_attention waits for
-- an operator and is kept, whatever its age. The states are those of oldest_finished.sql.
--
-- Locks: the deleted sagas rows (FOR UPDATE SKIP LOCKED: rows others hold are skipped).
DELETE FROM sagas WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM sagas
    WHERE state IN ('completed', 'compensated', 'failed', 'resolved') AND updated_at < now() - @window_us::bigint * interval '1 microsecond'
    ORDER BY updated_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED))
RETURNING id
