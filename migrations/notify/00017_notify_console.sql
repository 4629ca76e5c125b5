-- +goose Up
-- The operator console's reads, each on an index, so that no page and no poll reads every
-- user's rows: the search by phone (the phone each event was addressed to, as the inbox
-- stored it), and the bad messages newest first. The recent activity (newest first on
-- notifications_changes), a user's SMS (the primary key), the users (the primary key, then
-- progress by its key) and the dead letters (notifications_dead) have theirs already.
CREATE INDEX notifications_phone ON notify.notifications ((event->>'phone'), user_id);
CREATE INDEX bad_messages_received ON notify.bad_messages (received_at, msg_id);

-- +goose Down
DROP INDEX notify.bad_messages_received;
DROP INDEX notify.notifications_phone;
