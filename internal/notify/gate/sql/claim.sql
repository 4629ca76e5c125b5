-- Claim: lease up to @n users whose lane is due (due_at has come, or news woke them while
-- idle) and free, longest waiting first, each under a new fence, and read each one's next
-- SMS: the inbox rows from last_seq + 1 on, at most @run (one row of NULLs when there is
-- none). The heads are read in the snapshot in which the user's wake rows are marked with
-- the claim's fence (read by it).
WITH cand AS (
	SELECT user_id, min(at) AS at FROM (
		(SELECT user_id, due_at AS at FROM notify.progress
		 WHERE due_at <= now() AND (lane_until IS NULL OR lane_until < now())
		 ORDER BY due_at LIMIT @n)
		UNION ALL
		-- News wakes an idle user only (due_at NULL): one waiting for a retry or held
		-- back by the breaker (due_at to come) waits for it, news or not.
		(SELECT w.user_id, w.at FROM notify.wakes w JOIN notify.progress p ON p.user_id = w.user_id
		 WHERE p.due_at IS NULL AND (p.lane_until IS NULL OR p.lane_until < now())
		 ORDER BY w.at LIMIT 4 * @n)
	) x GROUP BY user_id
), c AS (
	SELECT p.user_id FROM notify.progress p JOIN cand ON cand.user_id = p.user_id
	WHERE (p.lane_until IS NULL OR p.lane_until < now()) AND (p.due_at IS NULL OR p.due_at <= now())
	ORDER BY cand.at, p.user_id
	LIMIT @n
	FOR UPDATE OF p SKIP LOCKED
), claimed AS (
	-- Only unindexed columns change (a HOT update). Should this lane die, the user is
	-- claimable again once the lease runs out: by its due_at when it came due, else by
	-- its wake rows, which stay (marked) while it is leased.
	UPDATE notify.progress p SET lane_owner = @owner, lane_until = now() + @lease_us::bigint * interval '1 microsecond',
		fence = p.fence + 1
	FROM c WHERE p.user_id = c.user_id
	RETURNING p.user_id, p.last_seq, p.fence
), seen AS (
	-- Marked, not deleted: a give-back as idle deletes the rows this claim read (this
	-- fence), and leaves news that came after.
	UPDATE notify.wakes w SET fence = claimed.fence FROM claimed WHERE w.user_id = claimed.user_id
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
