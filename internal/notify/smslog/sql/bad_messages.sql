-- BadMessages: undecodable messages before the cursor, newest first.
SELECT msg_id, queue, queue_offset, body, reason, received_at
FROM notify.bad_messages
WHERE (received_at, msg_id) < (@before_at, @before_msg_id)
ORDER BY received_at DESC, msg_id DESC
LIMIT @limit
