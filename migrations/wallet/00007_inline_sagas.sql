-- +goose Up
-- Inline sagas: the runner that starts a saga holds it under a fence, and recovery claims
-- sagas whose lease expired or whose backoff is due (see internal/saga).

-- fence: bumped by every claim; a runner's update is refused (fence set to -1, which the
-- CHECK refuses) unless the fence is still the one it holds.
ALTER TABLE sagas ADD COLUMN fence bigint NOT NULL DEFAULT 0;
ALTER TABLE sagas ADD CONSTRAINT sagas_fence_held CHECK (fence >= 0);
-- step_since: when the current step (or compensation) began: its retry window starts there.
ALTER TABLE sagas ADD COLUMN step_since timestamptz NOT NULL DEFAULT now();
-- The lease is next_run_at while lease_owner is set: a claim is due when next_run_at passed.
ALTER TABLE sagas DROP COLUMN lease_until;

-- The simulators' outage switch (internal/wallet/simulators.go): while until is in the future,
-- every call of that simulator fails (mode fail) or hangs until its caller's timeout (timeout).
CREATE TABLE sim_outages (
    target text        PRIMARY KEY CHECK (target IN ('gateway', 'merchant')),
    mode   text        NOT NULL CHECK (mode IN ('fail', 'timeout')),
    until  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE sim_outages;
ALTER TABLE sagas ADD COLUMN lease_until timestamptz;
ALTER TABLE sagas DROP COLUMN step_since;
ALTER TABLE sagas DROP CONSTRAINT sagas_fence_held;
ALTER TABLE sagas DROP COLUMN fence;
