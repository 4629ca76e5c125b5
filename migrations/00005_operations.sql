-- +goose Up
-- Operability: operators may resolve a saga that needs attention (a terminal state
-- of its own), every operator action on walletsvc is audited, and the notifier's metrics
-- queries (head-of-line wait, DLQ depth) get indexes so a scrape stays cheap.

ALTER TABLE sagas DROP CONSTRAINT sagas_state_check;
ALTER TABLE sagas ADD CONSTRAINT sagas_state_check
    CHECK (state IN ('running', 'compensating', 'completed', 'compensated', 'failed', 'needs_attention', 'resolved'));

-- Operator actions on walletsvc's sagas: who (the X-Operator header given with the admin
-- token), what (retry_saga, resolve_saga), on which saga, and why.
CREATE TABLE audit (
    id       bigserial   PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text        NOT NULL CHECK (actor <> ''),
    action   text        NOT NULL,
    saga_id  bigint      REFERENCES sagas (id),
    reason   text        NOT NULL CHECK (reason <> ''),
    detail   jsonb
);
CREATE INDEX audit_saga_idx ON audit (saga_id, id);

-- The users held by a missing predecessor (head-of-line wait metric, GET /v1/gate).
CREATE INDEX progress_waiting ON notify.progress (waiting_since) WHERE waiting_seq IS NOT NULL;
-- Replays per (user, seq): DLQ depth counts dead letters without one.
CREATE INDEX audit_user_seq ON notify.audit (user_id, seq, action);

-- +goose Down
DROP INDEX notify.audit_user_seq;
DROP INDEX notify.progress_waiting;
DROP TABLE audit;
UPDATE sagas SET state = 'needs_attention' WHERE state = 'resolved';
ALTER TABLE sagas DROP CONSTRAINT sagas_state_check;
ALTER TABLE sagas ADD CONSTRAINT sagas_state_check
    CHECK (state IN ('running', 'compensating', 'completed', 'compensated', 'failed', 'needs_attention'));
