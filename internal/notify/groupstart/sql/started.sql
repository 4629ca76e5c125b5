-- Started: a consumer group's first start on a topic, as recorded (no row: none yet). A plain
-- read: it locks nothing.
SELECT consumer_group, topic, consume_from, queues, process, instance, started_at
FROM notify.group_start WHERE consumer_group = @group AND topic = @topic
