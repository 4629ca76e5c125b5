-- +goose Up
-- Operability: operators may resolve a saga that needs attention (a terminal state
-- of its own), and every operator action on walletsvc is audited. (The notifier's indexes of
-- the same change are the notifier's own migration 00005.)

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

-- +goose Down
DROP TABLE audit;
UPDATE sagas SET state = 'needs_attention' WHERE state = 'resolved';
ALTER TABLE sagas DROP CONSTRAINT sagas_state_check;
ALTER TABLE sagas ADD CONSTRAINT sagas_state_check
    CHECK (state IN ('running', 'compensating', 'completed', 'compensated', 'failed', 'needs_attention'));
