-- DeadLetter: an SMS as an operator's replay reads it: its status, its stored event, and
-- whether its late SMS log row (a journaled replay's delivery) is there.
SELECT n.status, n.event,
       EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = n.user_id AND l.seq = n.seq AND l.late)
FROM notify.notifications n
WHERE n.user_id = @user AND n.seq = @seq
