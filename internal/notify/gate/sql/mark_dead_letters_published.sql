-- MarkDeadLettersPublished: these dead letters are in the DLQ topic.
UPDATE notify.notifications n SET dlq_published_at = now()
FROM unnest(@users::bigint[], @seqs::bigint[]) AS d(user_id, seq)
WHERE n.user_id = d.user_id AND n.seq = d.seq AND n.dlq_published_at IS NULL
