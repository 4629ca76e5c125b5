-- Known dead letter: whether the inbox has a row of (@user, @seq), whatever its status.
SELECT EXISTS (SELECT 1 FROM notify.notifications WHERE user_id = @user AND seq = @seq)
