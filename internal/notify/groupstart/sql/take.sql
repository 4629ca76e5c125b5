-- Take: record a consumer group's first start on a topic, unless one is recorded. Of several
-- processes taking it at once one inserts the row; the others insert nothing (ON CONFLICT
-- waits for the winner's transaction, then does nothing) and return no row: they read the
-- winner's with started.sql, in a statement of its own, whose snapshot sees it committed.
-- Locks: the new row's key only.
INSERT INTO notify.group_start (consumer_group, topic, consume_from, queues, process, instance)
VALUES (@group, @topic, @consume_from, @queues, @process, @instance)
ON CONFLICT (consumer_group, topic) DO NOTHING
RETURNING consumer_group, topic, consume_from, queues, process, instance, started_at
