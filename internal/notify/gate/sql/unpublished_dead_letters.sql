-- UnpublishedDeadLetters: how many dead-lettered SMS wait for the DLQ topic.
SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered' AND dlq_published_at IS NULL
