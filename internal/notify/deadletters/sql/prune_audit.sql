-- PruneAudit: delete up to @limit audit rows recorded more than @window_us microseconds ago,
-- oldest first, skipping rows others hold locked, once the SMS they name is no longer in the
-- inbox (retention pruned it). While it is, its rows are its replay count, which the
-- dead-letter list and the DLQ depth read and a replay takes as its fence: they stay.
DELETE FROM notify.audit WHERE ctid = ANY(ARRAY(
	SELECT a.ctid FROM notify.audit a
	WHERE a.at < now() - @window_us::bigint * interval '1 microsecond'
	  AND NOT EXISTS (SELECT 1 FROM notify.notifications n WHERE n.user_id = a.user_id AND n.seq = a.seq)
	ORDER BY a.at
	LIMIT @limit
	FOR UPDATE OF a SKIP LOCKED))
