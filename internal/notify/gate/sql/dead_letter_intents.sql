-- DeadLetterIntents: dead-lettered SMS not yet published to the DLQ topic, oldest first.
SELECT user_id, seq, COALESCE(msg_id, ''), convert_to(COALESCE(event::text, ''), 'UTF8'), COALESCE(last_error, '')
FROM notify.notifications WHERE status = 'dead_lettered' AND dlq_published_at IS NULL
ORDER BY finished_at, user_id, seq
LIMIT @limit
