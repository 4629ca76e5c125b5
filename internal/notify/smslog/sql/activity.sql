-- Activity: notifications changed before the cursor, newest first (backwards on
-- notifications_changes, one page).
SELECT n.user_id, n.seq, coalesce(n.kind, ''), coalesce(n.text, ''), n.event, n.status, n.attempts,
       coalesce(n.last_error, ''), n.finished_at, n.updated_at
FROM notify.notifications n
WHERE (n.updated_at, n.user_id, n.seq) < (@before_at, @before_user, @before_seq)
ORDER BY n.updated_at DESC, n.user_id DESC, n.seq DESC
LIMIT @limit
