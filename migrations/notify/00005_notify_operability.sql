-- +goose Up
-- Operability: the notifier's metrics queries (head-of-line wait, DLQ depth) get indexes so a
-- scrape stays cheap.

-- The users held by a missing predecessor (head-of-line wait metric, GET /v1/gate).
CREATE INDEX progress_waiting ON notify.progress (waiting_since) WHERE waiting_seq IS NOT NULL;
-- Replays per (user, seq): DLQ depth counts dead letters without one.
CREATE INDEX audit_user_seq ON notify.audit (user_id, seq, action);

-- +goose Down
DROP INDEX notify.audit_user_seq;
DROP INDEX notify.progress_waiting;
