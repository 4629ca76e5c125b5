-- +goose Up
-- Where each consumer group started: one row per group and topic, taken by the group's very
-- first start (the first process of the group that had to decide where a queue without a
-- committed offset starts), with the topic's queues as that process read them when it
-- started. CONSUME_FROM=last starts at their end only those queues, and only in that
-- process; a later start, another replica, or a queue added later starts a queue without an
-- offset at its first message (internal/notify/groupstart).
CREATE TABLE notify.group_start (
    consumer_group text        NOT NULL,
    topic          text        NOT NULL,
    consume_from   text        NOT NULL CHECK (consume_from IN ('first', 'last')),
    queues         text[]      NOT NULL, -- "<broker>/<queue id>"
    process        text        NOT NULL, -- a token the process drew at its start
    instance       text        NOT NULL, -- its CONSUMER_INSTANCE, '' when none
    started_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, topic)
);

-- +goose Down
-- Going down forgets that the groups started: a notifier with CONSUME_FROM=last would then
-- take its next start for the group's first, and start the queues without an offset at
-- their end.
DROP TABLE notify.group_start;
