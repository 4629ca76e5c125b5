-- +goose Up
-- A lane's claim of a user takes a new fence: progress.fence is incremented by every claim,
-- and a record (or a give-back) applies only under the fence its lane claimed with. The
-- owner name and last_seq were the fence before, which a process restarted under the same
-- name, or a lane that stalled past its lease while nobody had recorded yet, passed.
ALTER TABLE notify.progress ADD COLUMN fence bigint NOT NULL DEFAULT 0;

-- The deployment: one row, whose id is created once, here, and is part of every provider
-- idempotency key ("<deployment>:<user>:<seq>"), so that keys are unique across deployments
-- that share a provider, and an SMS is still sent again under the same key (an operator's
-- replay, a lane that retries).
CREATE TABLE notify.deployment (
    id         uuid        NOT NULL PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now(),
    one_row    boolean     NOT NULL DEFAULT true UNIQUE CHECK (one_row)
);
INSERT INTO notify.deployment DEFAULT VALUES;

-- +goose Down
-- Going down loses the deployment id: up again creates another, so an SMS in flight would
-- reach the provider under a new key.
DROP TABLE notify.deployment;
ALTER TABLE notify.progress DROP COLUMN fence;
