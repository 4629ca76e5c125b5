-- Skip, 2: the status of the seq to skip, if it ever arrived.
SELECT status FROM notify.notifications WHERE user_id = @user AND seq = @seq
