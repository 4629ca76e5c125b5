-- BadMessage: one undecodable message by its id (the primary key), its body whole.
SELECT msg_id, queue, queue_offset, body, octet_length(body), reason, received_at
FROM notify.bad_messages
WHERE msg_id = @msg_id
