-- PruneSMSLog: delete up to @limit SMS log rows written more than @window_us microseconds
-- ago, oldest first, skipping rows others hold locked. The gate's own decisions never read
-- the SMS log (a user's position is notify.progress), so none of them changes.
DELETE FROM notify.sms_log WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM notify.sms_log
	WHERE sent_at < now() - @window_us::bigint * interval '1 microsecond'
	ORDER BY sent_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED))
