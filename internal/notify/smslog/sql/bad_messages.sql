-- BadMessages: undecodable messages before the cursor, newest first, each with the first
-- @excerpt bytes of its body (cut here, so that the rest never leaves the database: a body
-- may be megabytes) and the body's whole size.
SELECT msg_id, queue, queue_offset, substring(body FROM 1 FOR @excerpt), octet_length(body), reason, received_at
FROM notify.bad_messages
WHERE (received_at, msg_id) < (@before_at, @before_msg_id)
ORDER BY received_at DESC, msg_id DESC
LIMIT @limit
