-- Skip, 1: lock the user's progress and tell whether later SMS wait in the inbox.
SELECT p.last_seq, EXISTS (SELECT 1 FROM notify.notifications n
		WHERE n.user_id = p.user_id AND n.seq > p.last_seq + 1 AND n.status = 'pending')
FROM notify.progress p WHERE p.user_id = @user
FOR UPDATE
