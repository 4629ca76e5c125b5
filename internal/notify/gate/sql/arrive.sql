-- Arrive: the arrivals the gate admitted (none of them finished), in ONE statement. Each
-- becomes a pending inbox row unless its (user, seq) is there already; each user with a new
-- row is woken (a row appended to notify.wakes); a user the gate had not seen gets its
-- progress row at the start given (@start_*), idle (due_at NULL): its wake row brings it to
-- a lane. It locks no row a lane may hold.
WITH ev AS (
	SELECT * FROM unnest(@users::bigint[], @seqs::bigint[], @msg_ids::text[], @events::jsonb[], @kinds::text[], @texts::text[], @queues::text[],
			@traceparents::text[])
		AS ev(user_id, seq, msg_id, event, kind, text, queue, traceparent)
), ins AS (
	INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text, queue, traceparent)
	SELECT DISTINCT ON (ev.user_id, ev.seq) ev.user_id, ev.seq, 'pending', ev.msg_id, ev.event, ev.kind, ev.text, NULLIF(ev.queue, ''),
		NULLIF(ev.traceparent, '')
	FROM ev
	ORDER BY ev.user_id, ev.seq
	ON CONFLICT (user_id, seq) DO NOTHING
	RETURNING user_id, seq
), fresh AS (
	INSERT INTO notify.progress (user_id, last_seq, due_at, baseline_seq, baseline_at)
	SELECT s.user_id, s.last_seq, NULL::timestamptz, NULLIF(s.baseline_seq, 0), CASE WHEN s.baseline_seq > 0 THEN now() END
	FROM unnest(@start_users::bigint[], @start_last_seqs::bigint[], @start_baselines::bigint[]) AS s(user_id, last_seq, baseline_seq)
	WHERE s.user_id IN (SELECT user_id FROM ins)
	ORDER BY s.user_id
	ON CONFLICT (user_id) DO NOTHING
	RETURNING baseline_seq IS NOT NULL AS baselined
), woken AS (
	INSERT INTO notify.wakes (user_id)
	SELECT DISTINCT user_id FROM ins
)
SELECT (SELECT count(*) FROM ins)::int, (SELECT count(*) FROM fresh WHERE baselined)::int
