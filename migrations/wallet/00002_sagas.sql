-- +goose Up
-- Durable sagas (internal/saga). One row per saga; runners claim due rows with
-- FOR UPDATE SKIP LOCKED and hold them with a lease (lease_owner, lease_until).
CREATE TABLE sagas (
    id            bigserial   PRIMARY KEY,
    kind          text        NOT NULL,
    state         text        NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'compensating', 'completed', 'compensated', 'failed', 'needs_attention')),
    input         jsonb       NOT NULL DEFAULT 'null',
    data          jsonb,
    step          int         NOT NULL DEFAULT 0 CHECK (step >= 0), -- index of the current step
    phase         text        NOT NULL DEFAULT 'forward' CHECK (phase IN ('forward', 'compensate')),
    attempts      int         NOT NULL DEFAULT 0 CHECK (attempts >= 0), -- of the current step
    next_run_at   timestamptz NOT NULL DEFAULT now(),
    lease_owner   text,
    lease_until   timestamptz,
    error_code    text,
    error_message text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- What runners scan: due, non-terminal sagas.
CREATE INDEX sagas_due_idx ON sagas (next_run_at) WHERE state IN ('running', 'compensating');
-- Listings by kind/state (admin pages, other packages joining on sagas).
CREATE INDEX sagas_kind_state_created_idx ON sagas (kind, state, created_at);

-- Step history, in order of execution (seq). One row per (step, phase) run; an operator's
-- retry of a failed compensation starts a new row, so earlier failures stay visible.
CREATE TABLE saga_steps (
    saga_id       bigint      NOT NULL REFERENCES sagas (id) ON DELETE CASCADE,
    seq           int         NOT NULL,
    step          int         NOT NULL, -- index in the definition
    name          text        NOT NULL,
    phase         text        NOT NULL CHECK (phase IN ('forward', 'compensate')),
    status        text        NOT NULL CHECK (status IN ('pending', 'done', 'failed', 'skipped')),
    attempts      int         NOT NULL DEFAULT 0,
    error_code    text,
    error_message text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    PRIMARY KEY (saga_id, seq)
);

-- At most one open record per (saga, step, phase): the engine updates it attempt by attempt.
CREATE UNIQUE INDEX saga_steps_pending_idx ON saga_steps (saga_id, step, phase) WHERE status = 'pending';

-- +goose Down
DROP TABLE IF EXISTS saga_steps;
DROP TABLE IF EXISTS sagas;
