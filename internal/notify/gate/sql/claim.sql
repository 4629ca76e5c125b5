-- Claim: lease up to @n users whose lane is due and free, longest waiting first, each under a
-- new fence, and read each one's next SMS: the inbox rows from last_seq + 1 on, at most @run
-- (one row of NULLs when there is none). A user is due when its due_at has come, or when it
-- is idle (due_at NULL) and has news: a wake row. Every user claimed is due at its lease's
-- end: should its lane die, that brings it back. The claim reads the oldest @drain wake
-- rows whose users it can lock, and deletes the wake rows of each user it claims and of
-- each that has a due_at (leased, or waiting for a retry): such a user is brought back by
-- its due_at, and whatever later makes it idle reads its inbox first, under its row lock
-- (record.sql, release.sql), so news is never left unread. An idle user's news it did not
-- claim stays, at the front for the next claim.
-- It reads O(@n + @drain) rows through indexes, whatever the backlog (progress_due from the
-- oldest due_at, wakes_at from the oldest news, primary keys for the rest), and passes over
-- only the news of users another statement holds at that moment.
-- Locks: the positions of the users it reads news of or claims (SKIP LOCKED), and the wake
-- rows it deletes.
WITH news AS MATERIALIZED (
	-- The oldest news, each row's user locked: a user another statement holds (a record, a
	-- claim of another replica, an operator's session) is skipped, and does not count
	-- towards the limit, so news behind it is still found.
	SELECT w.user_id, w.at, p.due_at, (p.lane_until IS NULL OR p.lane_until < now()) AS free
	FROM notify.wakes w JOIN notify.progress p ON p.user_id = w.user_id
	ORDER BY w.at
	LIMIT @drain
	FOR UPDATE OF p SKIP LOCKED
), due AS MATERIALIZED (
	SELECT user_id, due_at AS at, due_at, true AS free FROM notify.progress
	WHERE due_at <= now() AND (lane_until IS NULL OR lane_until < now())
	ORDER BY due_at
	LIMIT @n
	FOR UPDATE SKIP LOCKED
), c AS MATERIALIZED (
	SELECT user_id, min(at) AS at, min(due_at) AS due_at, bool_and(free) AS free
	FROM (SELECT * FROM news UNION ALL SELECT * FROM due) x
	GROUP BY user_id
), pick AS MATERIALIZED (
	-- News wakes an idle user only (due_at NULL): one waiting for a retry, or held back by
	-- the breaker (due_at to come), waits for it, news or not.
	SELECT user_id FROM c
	WHERE free AND (due_at IS NULL OR due_at <= now())
	ORDER BY COALESCE(due_at, at), user_id
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
