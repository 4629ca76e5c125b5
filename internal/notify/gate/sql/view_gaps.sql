-- View: the users held by a gap, longest first.
SELECT p.user_id, p.last_seq, p.last_seq + 1,
	(SELECT count(*) FROM notify.notifications n WHERE n.user_id = p.user_id AND n.seq > p.last_seq AND n.status = 'pending'),
	p.gap_since, p.gap_since < now() - @alert_after_us::bigint * interval '1 microsecond'
FROM notify.progress p WHERE p.gap_since IS NOT NULL
ORDER BY p.gap_since, p.user_id LIMIT @limit
