-- Audit: operator actions before the cursor's id, newest first (on the primary key).
SELECT id, at, actor, action, user_id, seq, reason FROM notify.audit WHERE id < @before_id ORDER BY id DESC LIMIT @limit
