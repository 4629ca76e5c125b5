-- Replays: how many replays of the dead letter (user, seq) are recorded, a replay's fence.
SELECT count(*)::int FROM notify.audit WHERE user_id = @user AND seq = @seq AND action = @action
