-- BadIntents: bad messages not yet published to the DLQ topic, oldest first.
SELECT msg_id, body, reason FROM notify.bad_messages WHERE dlq_published_at IS NULL
ORDER BY received_at
LIMIT @limit
