-- View: what the lanes hold, counted.
SELECT
	(SELECT count(*) FROM notify.notifications WHERE status = 'pending'),
	-- Due as a claim sees it: not leased, and due_at has come or news woke it idle.
	(SELECT count(*) FROM notify.progress p WHERE (p.lane_until IS NULL OR p.lane_until < now())
		AND (p.due_at <= now() OR (p.due_at IS NULL AND EXISTS (SELECT 1 FROM notify.wakes w WHERE w.user_id = p.user_id)))),
	(SELECT count(*) FROM notify.progress WHERE gap_since < now() - @alert_after_us::bigint * interval '1 microsecond'),
	COALESCE((SELECT extract(epoch FROM now() - min(gap_since)) FROM notify.progress WHERE gap_since IS NOT NULL), 0)::float8
