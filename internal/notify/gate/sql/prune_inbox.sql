-- PruneInbox: delete up to @limit inbox rows that finished (sent, dead-lettered and published
-- to the DLQ, or skipped) more than @window_us microseconds ago, oldest first, skipping rows
-- others hold locked. Only rows at or below their user's last_seq: the user's position
-- (notify.progress, never pruned) already says they are finished, so a redelivery of one is
-- still ignored (Admit: Finished) once its row is gone. A dead letter whose DLQ intent is not
-- yet published stays until the publisher has marked it.
DELETE FROM notify.notifications WHERE ctid = ANY(ARRAY(
	SELECT n.ctid FROM notify.notifications n
	JOIN notify.progress p ON p.user_id = n.user_id
	WHERE n.finished_at IS NOT NULL AND n.finished_at < now() - @window_us::bigint * interval '1 microsecond'
	  AND n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
	  AND (n.status <> 'dead_lettered' OR n.dlq_published_at IS NOT NULL)
	  AND n.seq <= p.last_seq
	ORDER BY n.finished_at
	LIMIT @limit
	FOR UPDATE OF n SKIP LOCKED))
