-- PruneWakes: delete up to @limit wake rows older than @window_us microseconds that wake
-- nobody: their user is due anyway (due_at set: the claim takes it by its due time, and
-- deletes its wakes), or has nothing pending past its last_seq. A wake that is the only
-- thing that would bring an idle user's next SMS to a lane is never deleted.
DELETE FROM notify.wakes WHERE ctid = ANY(ARRAY(
	SELECT w.ctid FROM notify.wakes w
	LEFT JOIN notify.progress p ON p.user_id = w.user_id
	WHERE w.at < now() - @window_us::bigint * interval '1 microsecond'
	  AND (p.user_id IS NULL OR p.due_at IS NOT NULL OR NOT EXISTS (
		SELECT 1 FROM notify.notifications n
		WHERE n.user_id = w.user_id AND n.seq > p.last_seq AND n.status = 'pending'))
	ORDER BY w.at
	LIMIT @limit
	FOR UPDATE OF w SKIP LOCKED))
