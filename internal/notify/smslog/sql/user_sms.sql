-- UserSMS: a user's finished SMS after @after_seq, in seq order, with their replays (on the
-- primary key, one page).
SELECT n.seq, n.status, n.attempts, coalesce(n.last_error, ''), coalesce(n.kind, ''),
       coalesce(n.text, ''), n.event, n.finished_at, r.n, r.last
FROM notify.notifications n
LEFT JOIN LATERAL (
	SELECT count(*)::int AS n, max(a.at) AS last FROM notify.audit a
	WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = @replay
) r ON true
WHERE n.user_id = @user AND n.seq > @after_seq AND n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
ORDER BY n.seq
LIMIT @limit
