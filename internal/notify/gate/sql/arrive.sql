-- Arrive: a batch of arrivals, in ONE statement. Each becomes a pending inbox row unless its
-- (user, seq) is there or finished already; each user with a new row is woken (a row
-- appended to notify.wakes); a user seen for the first time gets its progress row, due.
WITH ev AS (
	SELECT * FROM unnest(@users::bigint[], @seqs::bigint[], @msg_ids::text[], @events::jsonb[], @kinds::text[], @texts::text[], @queues::text[])
		AS ev(user_id, seq, msg_id, event, kind, text, queue)
), firsts AS (
	SELECT user_id, min(seq) AS first_seq FROM ev GROUP BY user_id
), known AS (
	-- A plain read: the inbox write never locks or updates a known user's progress
	-- row, so it never waits for a lane recording that user.
	SELECT p.user_id, p.last_seq FROM notify.progress p WHERE p.user_id IN (SELECT user_id FROM firsts)
), ins AS (
	INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text, queue)
	SELECT DISTINCT ON (ev.user_id, ev.seq) ev.user_id, ev.seq, 'pending', ev.msg_id, ev.event, ev.kind, ev.text, NULLIF(ev.queue, '')
	FROM ev
	JOIN firsts f ON f.user_id = ev.user_id
	LEFT JOIN known k ON k.user_id = ev.user_id
	WHERE ev.seq > COALESCE(k.last_seq, CASE WHEN @from_last THEN f.first_seq - 1 ELSE 0 END)
	ORDER BY ev.user_id, ev.seq
	ON CONFLICT (user_id, seq) DO NOTHING
	RETURNING user_id, seq
), fresh AS (
	INSERT INTO notify.progress (user_id, last_seq, due_at, baseline_seq, baseline_at)
	SELECT f.user_id,
	       CASE WHEN @from_last THEN f.first_seq - 1 ELSE 0 END,
	       now(),
	       CASE WHEN @from_last AND f.first_seq > 1 THEN f.first_seq END,
	       CASE WHEN @from_last AND f.first_seq > 1 THEN now() END
	FROM firsts f
	WHERE f.user_id IN (SELECT user_id FROM ins) AND f.user_id NOT IN (SELECT user_id FROM known)
	ORDER BY f.user_id
	ON CONFLICT (user_id) DO NOTHING
	RETURNING baseline_seq IS NOT NULL AS baselined
), woken AS (
	INSERT INTO notify.wakes (user_id)
	SELECT DISTINCT user_id FROM ins
)
SELECT (SELECT count(*) FROM ins)::int, (SELECT count(*) FROM fresh WHERE baselined)::int
