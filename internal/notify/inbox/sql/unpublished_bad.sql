-- UnpublishedBad: how many bad messages wait for the DLQ topic.
SELECT count(*) FROM notify.bad_messages WHERE dlq_published_at IS NULL
