-- SMS log: the SMS sent, not counting an operator's replays (late), in the order they were
-- written (notifier database). No arguments. Locks nothing.
SELECT user_id, seq, text FROM notify.sms_log WHERE NOT late ORDER BY id
