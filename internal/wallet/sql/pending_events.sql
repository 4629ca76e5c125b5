-- Pending events: the unpublished events of one broker queue, the relay's read. Arguments:
-- @after (the cursor), @fnv (the key hash: FNV-1a, else Java's), @queue_count, @queue_index,
-- @skip (ids left out), @limit, @horizon (the previous read's, a decimal xid8). One snapshot
-- gives the horizon, the highest id and the rows; a queue's rows are those whose key hash
-- puts them on it (see QueueSlice); the fresh rows come from the partial index of
-- unpublished ids from after on, the late ones from the partial index of unpublished
-- transaction ids from horizon on; each row carries its unpublished predecessor.
-- Locks nothing.
WITH snap AS MATERIALIZED (
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon,
           COALESCE((SELECT max(id) FROM wallet_events), 0) AS last
), mine AS (
    (SELECT e.id, e.user_id, e.seq, e.kind, e.amount, e.currency, e.balance_after, e.saga_id, e.phone, e.locale, e.occurred_at, e.traceparent, e.epoch, e.epoch_since
     FROM wallet_events e
     WHERE e.published_at IS NULL AND e.id > @after
       AND CASE WHEN @fnv THEN wallet_key_hash_fnv(e.user_id) % @queue_count ELSE abs(e.key_hash % @queue_count) END = @queue_index
       AND e.id <> ALL(@skip)
     ORDER BY e.id
     LIMIT @limit)
    UNION ALL
    (SELECT e.id, e.user_id, e.seq, e.kind, e.amount, e.currency, e.balance_after, e.saga_id, e.phone, e.locale, e.occurred_at, e.traceparent, e.epoch, e.epoch_since
     FROM wallet_events e
     WHERE @after > 0 AND e.published_at IS NULL AND e.xact >= @horizon::text::xid8 AND e.id <= @after
       AND CASE WHEN @fnv THEN wallet_key_hash_fnv(e.user_id) % @queue_count ELSE abs(e.key_hash % @queue_count) END = @queue_index
       AND e.id <> ALL(@skip))
)
SELECT s.horizon, s.last, e.id, e.user_id, e.seq, e.kind, e.amount, e.currency, e.balance_after, e.saga_id,
       e.phone, e.locale, e.occurred_at, p.id, e.traceparent, e.epoch, e.epoch_since
FROM snap s
LEFT JOIN mine e ON true
LEFT JOIN wallet_events p ON p.user_id = e.user_id AND p.seq = e.seq - 1 AND p.published_at IS NULL
ORDER BY e.id
