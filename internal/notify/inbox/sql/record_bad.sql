-- RecordBad: messages that do not decode, once per message id, with a dead-letter intent
-- (dlq_published_at NULL) unless @published (found in the DLQ topic already).
INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, dlq_published_at)
SELECT b.msg_id, b.queue, b.queue_offset, b.body, b.reason, CASE WHEN @published THEN now() END
FROM unnest(@msg_ids::text[], @queues::text[], @offsets::bigint[], @bodies::bytea[], @reasons::text[])
	AS b(msg_id, queue, queue_offset, body, reason)
ON CONFLICT (msg_id) DO NOTHING
