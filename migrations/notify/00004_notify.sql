-- +goose Up
-- The notifier's own tables (schema notify): the ordering gate, the SMS log, undecodable
-- messages and the operator audit trail.

-- Per user, the last seq whose SMS is finished (sent, dead-lettered or skipped), and the seq
-- the gate is waiting on when a predecessor is missing.
CREATE TABLE notify.progress (
    user_id        bigint PRIMARY KEY,
    last_seq       bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    waiting_seq    bigint,
    waiting_since  timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Per (user, seq), what happened to its SMS. Attempts are counted here, not in the client
-- (whose counter lives in memory and resets on restart and rebalance).
CREATE TABLE notify.notifications (
    user_id        bigint NOT NULL,
    seq            bigint NOT NULL CHECK (seq > 0),
    -- parked: arrived ahead of a missing predecessor; acknowledged on the broker and kept
    -- here until the predecessor is finished, so the queue moves on meanwhile.
    status         text NOT NULL CHECK (status IN ('pending', 'parked', 'sent', 'dead_lettered', 'skipped_by_operator')),
    attempts       integer NOT NULL DEFAULT 0,
    last_error     text,
    msg_id         text,
    event          jsonb,
    kind           text,
    text           text,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, seq)
);
CREATE INDEX notifications_dead ON notify.notifications (finished_at, user_id, seq) WHERE status = 'dead_lettered';
CREATE INDEX notifications_parked ON notify.notifications (user_id, seq) WHERE status = 'parked';
CREATE INDEX notifications_changes ON notify.notifications (updated_at, user_id, seq);

-- What the built-in log sender "delivered": one row per SMS, written in the gate's
-- transaction, so an SMS exists exactly once. Replays by an operator are extra rows marked late.
CREATE TABLE notify.sms_log (
    id       bigserial PRIMARY KEY,
    user_id  bigint NOT NULL,
    seq      bigint NOT NULL,
    phone    text NOT NULL,
    text     text NOT NULL,
    late     boolean NOT NULL DEFAULT false,
    sent_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sms_log_once ON notify.sms_log (user_id, seq) WHERE NOT late;

-- Messages that could not be decoded: recorded with their reason, then dead-lettered.
CREATE TABLE notify.bad_messages (
    msg_id       text PRIMARY KEY,
    queue        text NOT NULL,
    queue_offset bigint NOT NULL,
    body         bytea NOT NULL,
    reason       text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);

-- Operator actions: who did what and why.
CREATE TABLE notify.audit (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text NOT NULL,
    action   text NOT NULL,
    user_id  bigint,
    seq      bigint,
    reason   text NOT NULL DEFAULT '',
    detail   jsonb
);

-- +goose Down
DROP TABLE notify.audit;
DROP TABLE notify.bad_messages;
DROP TABLE notify.sms_log;
DROP TABLE notify.notifications;
DROP TABLE notify.progress;
