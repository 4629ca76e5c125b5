-- Changes: notifications changed after the cursor, in (updated_at, user_id, seq) order, with
-- the feed's horizon: now − the feed lag.
SELECT n.user_id, n.seq, coalesce(n.kind, ''), coalesce(n.text, ''), n.event, n.status, n.attempts,
       coalesce(n.last_error, ''), n.finished_at, n.updated_at, statement_timestamp() - @lag_us::bigint * interval '1 microsecond'
FROM notify.notifications n
WHERE (n.updated_at, n.user_id, n.seq) > (@after_at, @after_user, @after_seq)
ORDER BY n.updated_at, n.user_id, n.seq
LIMIT @limit
