-- Users: the summaries of the users @ids (one page of them), by user id: their SMS counted by
-- status and where they stand at the gate (both on primary keys: progress is read for the
-- page's users only, never joined whole).
SELECT s.user_id, s.sent, s.dead, s.skipped, s.pending,
       coalesce(p.last_seq, 0), CASE WHEN p.gap_since IS NOT NULL THEN p.last_seq + 1 END, p.gap_since,
       s.updated_at, s.phone
FROM (
	SELECT n.user_id,
	       count(*) FILTER (WHERE n.status = 'sent')::int AS sent,
	       count(*) FILTER (WHERE n.status = 'dead_lettered')::int AS dead,
	       count(*) FILTER (WHERE n.status = 'skipped_by_operator')::int AS skipped,
	       count(*) FILTER (WHERE n.status = 'pending')::int AS pending,
	       max(n.updated_at) AS updated_at,
	       coalesce((array_agg(n.event->>'phone' ORDER BY n.seq DESC))[1], '') AS phone
	FROM notify.notifications n
	WHERE n.user_id = ANY(@ids)
	GROUP BY n.user_id
) s
LEFT JOIN (SELECT p.user_id, p.last_seq, p.gap_since FROM notify.progress p WHERE p.user_id = ANY(@ids)) p ON p.user_id = s.user_id
ORDER BY s.user_id
