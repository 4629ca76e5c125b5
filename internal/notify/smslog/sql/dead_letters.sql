-- DeadLetters: dead-lettered SMS before the cursor, newest first, with their replays counted.
SELECT n.user_id, n.seq, coalesce(n.kind, ''), coalesce(n.text, ''), n.event, n.attempts,
       coalesce(n.last_error, ''), coalesce(n.msg_id, ''), n.finished_at,
       (SELECT count(*)::int FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = @replay)
FROM notify.notifications n
WHERE n.status = 'dead_lettered' AND (n.finished_at, n.user_id, n.seq) < (@before_at, @before_user, @before_seq)
ORDER BY n.finished_at DESC, n.user_id DESC, n.seq DESC
LIMIT @limit
