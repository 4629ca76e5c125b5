-- PruneBad: delete up to @limit bad messages published to the DLQ topic more than @window_us
-- microseconds ago, oldest publication first, skipping rows others hold locked. A bad
-- message whose dead-letter intent is not yet published (dlq_published_at NULL) is never
-- selected: the DLQ publisher still needs it.
DELETE FROM notify.bad_messages WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM notify.bad_messages
	WHERE dlq_published_at < now() - @window_us::bigint * interval '1 microsecond'
	ORDER BY dlq_published_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED))
