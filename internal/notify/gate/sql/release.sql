-- Release: give a user back, only while it is still leased under @fence. With @requeue the
-- user is due again at once; otherwise it is idle: not due, and marked as waiting on a gap
-- when later seqs are in the inbox while its next is not; the wake rows its claim read are
-- deleted (news that came after it stays, and wakes the user again).
WITH rel AS (
	UPDATE notify.progress p SET lane_owner = NULL, lane_until = NULL,
		due_at = CASE WHEN @requeue THEN now() END,
		gap_since = CASE
			WHEN NOT @requeue AND EXISTS (SELECT 1 FROM notify.notifications n
				WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
			THEN COALESCE(p.gap_since, now()) END,
		updated_at = now()
	WHERE p.user_id = @user AND p.fence = @fence AND p.lane_owner IS NOT NULL
	RETURNING p.user_id
)
DELETE FROM notify.wakes w USING rel WHERE NOT @requeue AND w.user_id = rel.user_id AND w.fence = @fence
