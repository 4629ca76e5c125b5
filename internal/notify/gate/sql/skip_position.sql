-- Skip, 1: where the user stands, its row locked, and whether later SMS wait in the inbox.
SELECT p.last_seq, p.fence, p.lane_owner IS NOT NULL, EXISTS (SELECT 1 FROM notify.notifications n
		WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
FROM notify.progress p WHERE p.user_id = @user
FOR UPDATE
