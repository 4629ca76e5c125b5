-- Arrive: the arrivals the gate admitted (none of them finished), in ONE statement. Each
-- becomes a pending inbox row unless its (user, seq) is there already. A user the gate had
-- not seen gets its progress row at the start given (@start_*: its position, baseline, and
-- the wallet epoch it starts in). A user with a new row
-- whose lane is free and idle (due_at NULL), and whose next SMS is one of the new rows, is
-- claimed here for @owner, as claim.sql would (a new fence, leased and due at the lease's
-- end), up to @slots users (the workers this process has free): its SMS go to a worker
-- without a wake row or a claim statement of their own. Every other user with a new row is
-- woken (a row appended to notify.wakes), for a claim to take.
-- Locks: only progress rows no other statement holds (SKIP LOCKED: a user a lane is
-- recording is woken instead), so a queue never waits for a lane.
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
	RETURNING user_id, seq, msg_id, event, text, traceparent
), idle AS MATERIALIZED (
	-- Known users whose next SMS just arrived, idle and free, each locked (the lock, taken
	-- on the row's newest version, re-checks the conditions there). The lanes' free workers
	-- bound how many.
	SELECT p.user_id FROM notify.progress p
	WHERE p.user_id = ANY(ARRAY(SELECT DISTINCT user_id FROM ins))
	  AND p.due_at IS NULL AND (p.lane_until IS NULL OR p.lane_until < now())
	  AND EXISTS (SELECT 1 FROM ins WHERE ins.user_id = p.user_id AND ins.seq = p.last_seq + 1)
	ORDER BY p.user_id
	LIMIT @slots
	FOR UPDATE OF p SKIP LOCKED
), claimed AS (
	UPDATE notify.progress p SET lane_owner = @owner, lane_until = now() + @lease_us::bigint * interval '1 microsecond',
		due_at = now() + @lease_us::bigint * interval '1 microsecond', fence = p.fence + 1
	WHERE p.user_id = ANY(ARRAY(SELECT user_id FROM idle))
	RETURNING p.user_id, p.last_seq, p.fence
), start AS (
	SELECT s.user_id, s.last_seq, s.baseline_seq, s.epoch, s.epoch_since,
	       -- claimed at once when its first SMS is one of the new rows, while workers are left
	       row_number() OVER (ORDER BY s.user_id) <= @slots - (SELECT count(*) FROM idle)
	         AND EXISTS (SELECT 1 FROM ins WHERE ins.user_id = s.user_id AND ins.seq = s.last_seq + 1) AS take
	FROM unnest(@start_users::bigint[], @start_last_seqs::bigint[], @start_baselines::bigint[], @start_epochs::bigint[],
			@start_epoch_sinces::bigint[]) AS s(user_id, last_seq, baseline_seq, epoch, epoch_since)
	WHERE s.user_id IN (SELECT user_id FROM ins)
), fresh AS (
	INSERT INTO notify.progress (user_id, last_seq, due_at, baseline_seq, baseline_at, lane_owner, lane_until, fence, epoch, epoch_since)
	SELECT s.user_id, s.last_seq,
		CASE WHEN s.take THEN now() + @lease_us::bigint * interval '1 microsecond' END,
		NULLIF(s.baseline_seq, 0), CASE WHEN s.baseline_seq > 0 THEN now() END,
		CASE WHEN s.take THEN @owner::text END,
		CASE WHEN s.take THEN now() + @lease_us::bigint * interval '1 microsecond' END,
		CASE WHEN s.take THEN 1 ELSE 0 END, s.epoch, s.epoch_since
	FROM start s
	ORDER BY s.user_id
	ON CONFLICT (user_id) DO NOTHING
	RETURNING user_id, last_seq, fence, lane_owner IS NOT NULL AS taken, baseline_seq IS NOT NULL AS baselined
), took AS (
	SELECT user_id, last_seq, fence FROM claimed
	UNION ALL
	SELECT user_id, last_seq, fence FROM fresh WHERE taken
), woken AS (
	INSERT INTO notify.wakes (user_id)
	SELECT DISTINCT user_id FROM ins WHERE user_id NOT IN (SELECT user_id FROM took)
	RETURNING user_id
), counts AS (
	SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM fresh WHERE baselined)::int AS baselines,
	       (SELECT count(*) FROM woken)::int AS woken
)
-- The counts, and the users claimed, each with its new rows from its next seq on (at most
-- @run), in the columns of claim.sql.
SELECT c.inserted, c.baselines, c.woken,
       t.user_id, t.last_seq, t.fence,
       h.seq, CASE WHEN h.seq IS NULL THEN '' ELSE 'pending' END, 0, 0::float8, COALESCE(h.msg_id, ''), COALESCE(h.event::text, ''),
       COALESCE(h.text, ''), COALESCE(h.traceparent, '')
FROM counts c
LEFT JOIN took t ON true
LEFT JOIN ins h ON h.user_id = t.user_id AND h.seq >= t.last_seq + 1 AND h.seq < t.last_seq + 1 + @run
ORDER BY t.user_id, h.seq
