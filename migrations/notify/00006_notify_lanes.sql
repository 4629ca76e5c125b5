-- +goose Up
-- Notifier lanes. The orderly consumer only writes what it receives into an inbox and
-- acknowledges; per-user lanes deliver from there. The inbox is notify.notifications: a row
-- is written 'pending' when its message arrives and finished by the lane that delivers it.
-- Parking is gone: a message ahead of its predecessor simply waits in the inbox.
UPDATE notify.notifications SET status = 'pending' WHERE status = 'parked';
ALTER TABLE notify.notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notify.notifications ADD CONSTRAINT notifications_status_check
    CHECK (status IN ('pending', 'sent', 'dead_lettered', 'skipped_by_operator'));
DROP INDEX notify.notifications_parked;
-- first_attempt_at starts the dead-letter window (database clock); dlq_published_at is set
-- once a dead letter is in %DLQ%<group>: a dead letter without it is an intent the DLQ
-- publisher still has to carry out.
ALTER TABLE notify.notifications
    ADD COLUMN first_attempt_at timestamptz,
    ADD COLUMN dlq_published_at timestamptz;
-- Dead letters of the old path went to the DLQ through the client already.
UPDATE notify.notifications SET dlq_published_at = finished_at WHERE status = 'dead_lettered';
CREATE INDEX notifications_dlq_intent ON notify.notifications (finished_at, user_id, seq)
    WHERE status = 'dead_lettered' AND dlq_published_at IS NULL;
-- The inbox's size, for metrics.
CREATE INDEX notifications_pending ON notify.notifications (user_id, seq) WHERE status = 'pending';

-- A user's lane. due_at: when a lane should look at the user next (NULL: nothing to do, or
-- waiting for a missing predecessor); wake: bumped by every inbox write for the user, so a
-- lane never releases a user over news it has not seen; lane_owner/lane_until: the lease of
-- the lane working on it; gap_since: since when its next seq is missing while later ones
-- wait; baseline_seq/at: where a group that started from the end of the topic began it.
ALTER TABLE notify.progress
    DROP COLUMN waiting_seq,
    DROP COLUMN waiting_since,
    ADD COLUMN due_at       timestamptz,
    ADD COLUMN wake         bigint NOT NULL DEFAULT 0,
    ADD COLUMN lane_owner   text,
    ADD COLUMN lane_until   timestamptz,
    ADD COLUMN gap_since    timestamptz,
    ADD COLUMN baseline_seq bigint,
    ADD COLUMN baseline_at  timestamptz;
UPDATE notify.progress p SET due_at = now()
    WHERE EXISTS (SELECT 1 FROM notify.notifications n WHERE n.user_id = p.user_id AND n.seq > p.last_seq AND n.status = 'pending');
CREATE INDEX progress_due ON notify.progress (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX progress_gap ON notify.progress (gap_since) WHERE gap_since IS NOT NULL;
CREATE INDEX progress_baseline ON notify.progress (baseline_at) WHERE baseline_seq IS NOT NULL;

-- Undecodable messages are dead-lettered by the DLQ publisher too, from this record.
ALTER TABLE notify.bad_messages ADD COLUMN dlq_published_at timestamptz;
UPDATE notify.bad_messages SET dlq_published_at = received_at;
CREATE INDEX bad_messages_dlq_intent ON notify.bad_messages (received_at) WHERE dlq_published_at IS NULL;

-- An operator replay keeps the SMS's idempotency key (user:seq): the log sender delivers it
-- at most once more, as one row marked late.
CREATE UNIQUE INDEX sms_log_late_once ON notify.sms_log (user_id, seq) WHERE late;

-- +goose Down
DROP INDEX notify.sms_log_late_once;
DROP INDEX notify.bad_messages_dlq_intent;
ALTER TABLE notify.bad_messages DROP COLUMN dlq_published_at;
DROP INDEX notify.progress_baseline;
DROP INDEX notify.progress_gap;
DROP INDEX notify.progress_due;
ALTER TABLE notify.progress
    DROP COLUMN due_at, DROP COLUMN wake, DROP COLUMN lane_owner, DROP COLUMN lane_until,
    DROP COLUMN gap_since, DROP COLUMN baseline_seq, DROP COLUMN baseline_at,
    ADD COLUMN waiting_seq bigint,
    ADD COLUMN waiting_since timestamptz;
CREATE INDEX progress_waiting ON notify.progress (waiting_since) WHERE waiting_seq IS NOT NULL;
DROP INDEX notify.notifications_pending;
DROP INDEX notify.notifications_dlq_intent;
ALTER TABLE notify.notifications DROP COLUMN first_attempt_at, DROP COLUMN dlq_published_at;
ALTER TABLE notify.notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notify.notifications ADD CONSTRAINT notifications_status_check
    CHECK (status IN ('pending', 'parked', 'sent', 'dead_lettered', 'skipped_by_operator'));
CREATE INDEX notifications_parked ON notify.notifications (user_id, seq) WHERE status = 'parked';
