-- Finished: whether the user's position is at or past @seq (its SMS finished, whether or not
-- its inbox row is still kept).
SELECT EXISTS (SELECT 1 FROM notify.progress WHERE user_id = @user AND last_seq >= @seq)
