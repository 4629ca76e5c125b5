-- MarkBadPublished: these bad messages are in the DLQ topic.
UPDATE notify.bad_messages SET dlq_published_at = now() WHERE msg_id = ANY(@msg_ids) AND dlq_published_at IS NULL
