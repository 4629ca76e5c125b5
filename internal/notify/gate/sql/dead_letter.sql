-- DeadLetter: an SMS as an operator's replay reads it: its status, its stored event, whether
-- its late SMS log row (a journaled replay's delivery) is there, and the traceparent of its
-- arrival ('' untraced), which the replay's span links to.
SELECT n.status, n.event,
       EXISTS (SELECT 1 FROM notify.sms_log l WHERE l.user_id = n.user_id AND l.seq = n.seq AND l.late),
       coalesce(n.traceparent, '')
FROM notify.notifications n
WHERE n.user_id = @user AND n.seq = @seq
