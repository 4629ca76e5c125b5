-- +goose Up
-- The queue each inbox row came from ("broker-a/3"), as the consumer saw it: on a cluster it
-- says which broker held a user's message, so an operator (and the chaos run) can tell the
-- users a dead broker held up from everyone else. NULL for rows written before it existed
-- and for rows no message made (operator skips, dead letters found only in the DLQ).
ALTER TABLE notify.notifications ADD COLUMN queue text;

-- +goose Down
ALTER TABLE notify.notifications DROP COLUMN queue;
