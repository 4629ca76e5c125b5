-- Skip through, 1: where the user stands, its row locked, and whether an SMS after @through
-- waits in the inbox (the user is held by the range).
SELECT p.last_seq, EXISTS (SELECT 1 FROM notify.notifications n
		WHERE n.user_id = p.user_id AND n.seq > @through AND n.status = 'pending')
FROM notify.progress p WHERE p.user_id = @user
FOR UPDATE
