-- LockDeadLetter: lock an SMS's row in the caller's transaction (an operator's replay records
-- under it).
SELECT status FROM notify.notifications WHERE user_id = @user AND seq = @seq FOR UPDATE
