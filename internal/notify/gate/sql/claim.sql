-- Claim: lease up to @n users whose lane is due and free, longest waiting first, each under a
-- new fence, and read each one's next SMS: the inbox rows from last_seq + 1 on, at most @run
-- (one row of NULLs when there is none). A user is due when its due_at has come, or when it
-- is idle (due_at NULL) and has news: a wake row. The claim reads up to @drain of the oldest
-- wake rows and locks their users' positions (SKIP LOCKED: a user a record or another claim
-- holds keeps its wake rows for a later claim); it deletes the wake rows of each user it
-- claims, and of each user that has a due_at (leased: due at its lease's end; or waiting
-- for a retry): such a user is brought back by its due_at, and whatever later makes it idle
-- reads its inbox first, under its row lock (record.sql, release.sql), so news is never
-- left unread. Every user claimed is due at its lease's end: should its lane die, that
-- brings it back, and the wake rows ahead of an idle user's are never a leased user's.
-- It reads O(@n + @drain) rows through indexes, whatever the backlog: progress_due from the
-- oldest due_at, wakes_at from the oldest news, the primary keys for the rest.
-- Locks: the positions of the users it claims or drains news of, and those wake rows.
WITH news AS MATERIALIZED (
	SELECT w.user_id, min(w.at) AS at
	FROM (SELECT user_id, at FROM notify.wakes ORDER BY at LIMIT @drain) w
	GROUP BY w.user_id
), due AS MATERIALIZED (
	SELECT user_id, due_at AS at FROM notify.progress
	WHERE due_at <= now() AND (lane_until IS NULL OR lane_until < now())
	ORDER BY due_at LIMIT @n
), cand AS MATERIALIZED (
	SELECT user_id, min(at) AS at FROM (SELECT * FROM due UNION ALL SELECT * FROM news) x GROUP BY user_id
), c AS MATERIALIZED (
	SELECT p.user_id, p.due_at, (p.lane_until IS NULL OR p.lane_until < now()) AS free
	FROM notify.progress p
	WHERE p.user_id = ANY(ARRAY(SELECT user_id FROM cand))
	FOR UPDATE OF p SKIP LOCKED
), pick AS MATERIALIZED (
	-- News wakes an idle user only (due_at NULL): one waiting for a retry, or held back by
	-- the breaker (due_at to come), waits for it, news or not.
	SELECT c.user_id FROM c JOIN cand ON cand.user_id = c.user_id
	WHERE c.free AND (c.due_at IS NULL OR c.due_at <= now())
	ORDER BY COALESCE(c.due_at, cand.at), c.user_id
	LIMIT @n
), claimed AS (
	UPDATE notify.progress p SET lane_owner = @owner, lane_until = now() + @lease_us::bigint * interval '1 microsecond',
		due_at = now() + @lease_us::bigint * interval '1 microsecond', fence = p.fence + 1
	WHERE p.user_id = ANY(ARRAY(SELECT user_id FROM pick))
	RETURNING p.user_id, p.last_seq, p.fence
), drained AS (
	-- The news of the users claimed, and of those that have a due time (leased, or waiting
	-- for a retry: news does not change when they are due). An idle user's news that this
	-- claim did not claim stays: it is at the front of the next claim's news.
	DELETE FROM notify.wakes w
	WHERE w.user_id = ANY(ARRAY(SELECT user_id FROM pick UNION ALL SELECT user_id FROM c WHERE c.due_at IS NOT NULL))
)
SELECT claimed.user_id, claimed.last_seq, claimed.fence,
       n.seq, COALESCE(n.status, ''), COALESCE(n.attempts, 0),
       COALESCE(extract(epoch FROM now() - n.first_attempt_at), 0)::float8, COALESCE(n.msg_id, ''), COALESCE(n.event::text, ''),
       COALESCE(n.text, ''), COALESCE(n.traceparent, '')
FROM claimed
LEFT JOIN LATERAL (
	SELECT * FROM notify.notifications n
	WHERE n.user_id = claimed.user_id AND n.seq >= claimed.last_seq + 1 AND n.seq < claimed.last_seq + 1 + @run
	ORDER BY n.seq
) n ON true
ORDER BY claimed.user_id, n.seq
