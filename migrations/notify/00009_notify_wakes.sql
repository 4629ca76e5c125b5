-- +goose Up
-- Wake-ups move off the users' progress rows. An inbox write used to bump
-- notify.progress.wake, which made it wait for the row lock of any lane recording that user
-- (a record of many users can hold its locks for a second or more on a busy machine), and a
-- queue waiting there consumes nothing. Now an inbox write appends one row per woken user
-- here — no unique key, so it never waits for anyone — and a lane's claim or record deletes
-- the rows it has seen (those in its snapshot, whose SMS it read in that same snapshot). A
-- row still here names a user with news no lane has read: a claim takes it while the user
-- is idle (due_at NULL), so a lane that gave the user back as idle just before the write
-- landed never strands it; a user waiting for a retry waits for its due_at, news or not.
CREATE TABLE notify.wakes (
    user_id bigint      NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wakes_user ON notify.wakes (user_id);
CREATE INDEX wakes_at ON notify.wakes (at);
-- Users a pending wake counter still held news for are simply due.
UPDATE notify.progress SET due_at = COALESCE(due_at, now())
    WHERE due_at IS NULL AND EXISTS (SELECT 1 FROM notify.notifications n
        WHERE n.user_id = progress.user_id AND n.seq = progress.last_seq + 1 AND n.status = 'pending');
ALTER TABLE notify.progress DROP COLUMN wake;

-- +goose Down
ALTER TABLE notify.progress ADD COLUMN wake bigint NOT NULL DEFAULT 0;
UPDATE notify.progress p SET due_at = COALESCE(p.due_at, now())
    WHERE EXISTS (SELECT 1 FROM notify.wakes w WHERE w.user_id = p.user_id);
DROP TABLE notify.wakes;
