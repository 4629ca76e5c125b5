-- OldestBad: how long ago, in seconds, the oldest bad message kept reached the DLQ topic
-- (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(dlq_published_at))::float8 FROM notify.bad_messages WHERE dlq_published_at IS NOT NULL
