-- Users: the users with notifications after the cursor's, by user id, with their SMS counted
-- by status and where they stand at the gate.
SELECT n.user_id,
       count(*) FILTER (WHERE n.status = 'sent')::int,
       count(*) FILTER (WHERE n.status = 'dead_lettered')::int,
       count(*) FILTER (WHERE n.status = 'skipped_by_operator')::int,
       count(*) FILTER (WHERE n.status = 'pending')::int,
       coalesce(max(p.last_seq), 0), max(p.last_seq + 1) FILTER (WHERE p.gap_since IS NOT NULL),
       max(p.gap_since), max(n.updated_at)
FROM notify.notifications n
LEFT JOIN notify.progress p ON p.user_id = n.user_id
WHERE n.user_id > @after_user
GROUP BY n.user_id
ORDER BY n.user_id
LIMIT @limit
