-- Audit: the latest operator actions, newest first.
SELECT id, at, actor, action, user_id, seq, reason FROM notify.audit ORDER BY id DESC LIMIT @limit
