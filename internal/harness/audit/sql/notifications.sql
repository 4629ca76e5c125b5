-- Notifications: the gate's status of every inbox row (notifier database). No arguments.
-- Locks nothing.
SELECT user_id, seq, status FROM notify.notifications
