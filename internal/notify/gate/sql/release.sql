-- Release: give a user back, only while it is still leased under @fence (its position locked
-- by lock.sql in this transaction, so this statement's snapshot sees every SMS whose wake row
-- a claim deleted before). With @requeue, or when its next seq is in the inbox, the user is
-- due again at once; otherwise it is idle: not due, and marked as waiting on a gap when later
-- seqs are in the inbox while its next is not. Its wake rows of this snapshot are deleted
-- (news that came after stays, and wakes the user again).
WITH rel AS (
	UPDATE notify.progress p SET lane_owner = NULL, lane_until = NULL,
		due_at = CASE WHEN @requeue OR nx.here THEN now() END,
		gap_since = CASE
			WHEN NOT @requeue AND NOT nx.here AND EXISTS (SELECT 1 FROM notify.notifications n
				WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
			THEN COALESCE(p.gap_since, now()) END,
		updated_at = now()
	FROM (SELECT EXISTS (SELECT 1 FROM notify.notifications n JOIN notify.progress q ON q.user_id = n.user_id
		WHERE q.user_id = @user AND n.seq = q.last_seq + 1) AS here) nx
	WHERE p.user_id = @user AND p.fence = @fence AND p.lane_owner IS NOT NULL
	RETURNING p.user_id
)
DELETE FROM notify.wakes w USING rel WHERE w.user_id = rel.user_id
