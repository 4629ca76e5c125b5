-- Record: the outcomes the gate admitted (gate.Admit, on the users' positions locked by
-- lock.sql in this transaction), in ONE statement: per user its new position (where
-- gate.Advance moved it), its notification rows, and for a journaled Sent its SMS log rows;
-- then the user's next SMS (at most @run) for the lane.
WITH o AS (
	SELECT * FROM unnest(@users::bigint[], @seqs::bigint[], @verdicts::text[], @attempts::int[],
		@reasons::text[], @texts::text[], @phones::text[], @journal::bool[])
		AS o(user_id, seq, verdict, attempts, reason, text, phone, journal)
), u AS (
	-- One row per user: where it stands now, and the verdict and delay of its last outcome
	-- (a retry or a postponed send waits that long).
	SELECT * FROM unnest(@u_users::bigint[], @u_last_seqs::bigint[], @u_verdicts::text[], @u_delays_us::bigint[])
		AS u(user_id, last_seq, verdict, delay_us)
), st AS (
	-- idle: the user has nothing more to send (its next seq is not in the inbox, read
	-- in this statement's snapshot, taken after lock.sql locked the users' positions: it
	-- sees every SMS whose wake row a claim deleted before): the lane gives it back here,
	-- without a statement of its own. An inbox write this snapshot does not see keeps its
	-- wake row (seen deletes only the rows of this snapshot), so a claim takes the user again.
	-- (LATERAL ... LIMIT 1, not EXISTS: the planner may turn an EXISTS into a hash
	-- of the whole inbox.)
	SELECT u.*,
	       u.verdict IN ('sent', 'dead_lettered', 'advance') AND nx.seq IS NULL AS idle,
	       lt.seq IS NOT NULL AS later
	FROM u
	LEFT JOIN LATERAL (SELECT n.seq FROM notify.notifications n
		WHERE n.user_id = u.user_id AND n.seq = u.last_seq + 1 LIMIT 1) nx ON true
	LEFT JOIN LATERAL (SELECT n.seq FROM notify.notifications n
		WHERE n.user_id = u.user_id AND n.seq > u.last_seq + 1 AND n.status = 'pending' LIMIT 1) lt ON true
), adv AS (
	UPDATE notify.progress p SET
		last_seq   = st.last_seq,
		due_at     = CASE WHEN st.verdict IN ('retry', 'postponed') THEN now() + st.delay_us * interval '1 microsecond'
		                  WHEN st.idle THEN NULL ELSE p.due_at END,
		lane_owner = CASE WHEN st.verdict IN ('retry', 'postponed') OR st.idle THEN NULL ELSE p.lane_owner END,
		lane_until = CASE WHEN st.verdict IN ('retry', 'postponed') OR st.idle THEN NULL
		                  ELSE now() + @lease_us::bigint * interval '1 microsecond' END,
		gap_since  = CASE WHEN st.idle AND st.later THEN COALESCE(p.gap_since, now()) END,
		updated_at = now()
	FROM st
	-- The users found by key (an array whose length the planner does not guess), not only
	-- by the join: it otherwise read the whole table to hash it, every record, as the
	-- users the notifier has ever seen grew.
	WHERE p.user_id = ANY(ARRAY(SELECT user_id FROM st)) AND p.user_id = st.user_id
	RETURNING p.user_id, st.idle, st.verdict IN ('retry', 'postponed') OR st.idle AS released
), hit AS (
	-- The inbox rows the outcomes finish or retry, each found by its key: a lookup per
	-- outcome (LATERAL ... LIMIT 1 keeps the planner from joining the outcomes with every
	-- pending row, which it did when its statistics said few were pending: a record then
	-- read the whole backlog, and grew slower as the backlog grew). upd and logged join the
	-- outcomes with st (the users, estimated from the arrays), not with adv: the planner
	-- takes an UPDATE's output for one row and joined every user with every outcome,
	-- quadratic in the batch (0.5 s of a 0.75 s record of 8,192 SMS).
	SELECT o.*, t.tid FROM o JOIN st ON st.user_id = o.user_id
	CROSS JOIN LATERAL (SELECT n1.ctid AS tid FROM notify.notifications n1
		WHERE n1.user_id = o.user_id AND n1.seq = o.seq AND n1.status = 'pending' LIMIT 1) t
	WHERE o.verdict <> 'advance'
), upd AS (
	UPDATE notify.notifications n SET
		status           = CASE WHEN h.verdict IN ('sent', 'dead_lettered') THEN h.verdict ELSE n.status END,
		attempts         = h.attempts,
		first_attempt_at = COALESCE(n.first_attempt_at, now()),
		last_error       = CASE WHEN h.verdict = 'sent' THEN n.last_error ELSE NULLIF(h.reason, '') END,
		finished_at      = CASE WHEN h.verdict IN ('sent', 'dead_lettered') THEN now() ELSE n.finished_at END,
		updated_at       = now()
	FROM hit h
	WHERE n.ctid = ANY(ARRAY(SELECT tid FROM hit)) AND n.ctid = h.tid
), logged AS (
	INSERT INTO notify.sms_log (user_id, seq, phone, text, late)
	SELECT o.user_id, o.seq, o.phone, o.text, false
	FROM o JOIN st ON st.user_id = o.user_id
	WHERE o.verdict = 'sent' AND o.journal
	ORDER BY o.user_id, o.seq
	ON CONFLICT (user_id, seq) WHERE NOT late DO NOTHING
), seen AS (
	-- The users' wake rows of this snapshot, whose news st and the heads below read: a user
	-- still leased keeps its due_at (its lease's end), one given back is due or read idle here.
	DELETE FROM notify.wakes w WHERE w.user_id = ANY(ARRAY(SELECT user_id FROM adv))
)
SELECT adv.user_id, st.last_seq, adv.idle,
       n.seq, COALESCE(n.status, ''), COALESCE(n.attempts, 0),
       COALESCE(extract(epoch FROM now() - n.first_attempt_at), 0)::float8, COALESCE(n.msg_id, ''), COALESCE(n.event::text, ''),
       COALESCE(n.text, ''), COALESCE(n.traceparent, '')
FROM adv
JOIN st ON st.user_id = adv.user_id
LEFT JOIN LATERAL (
	SELECT * FROM notify.notifications n
	WHERE n.user_id = adv.user_id AND n.seq >= st.last_seq + 1
	  AND n.seq < st.last_seq + 1 + (CASE WHEN st.verdict IN ('retry', 'postponed') OR adv.idle THEN 0 ELSE @run END)
	ORDER BY n.seq
) n ON true
ORDER BY adv.user_id, n.seq
