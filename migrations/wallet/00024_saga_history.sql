-- +goose Up
-- A saga's step history lives in its own row (sagas.history, a JSON array in order of
-- execution) instead of a row per step in saga_steps (docs/ARCHITECTURE.md, "The saga
-- row"): every commit of a saga already updates its row, so it writes the history there too,
-- and a deposit no longer inserts and updates three step rows and their four index entries
-- beside it. Each element is {"step", "name", "phase", "status", "attempts", "error"?}; an
-- element with status "pending" is the open record of the step in progress.
--
-- The existing history moves into the rows. A replica of the previous version still running
-- while this runs fails its commits (saga_steps is gone); its sagas are recovered, with the
-- same idempotency keys, once their leases expire: stop it first to avoid the wait.
--
-- Both tables are locked first, at the strongest level this needs: taking it step by step
-- would deadlock with a runner's claim or commit that came in between.
LOCK TABLE sagas, saga_steps IN ACCESS EXCLUSIVE MODE;
ALTER TABLE sagas ADD COLUMN history jsonb NOT NULL DEFAULT '[]';

UPDATE sagas s SET history = h.history
FROM (
    SELECT saga_id, jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'step', step, 'name', name, 'phase', phase, 'status', status, 'attempts', attempts,
               'error', CASE WHEN error_code IS NULL AND error_message IS NULL THEN NULL
                             ELSE jsonb_build_object('code', COALESCE(error_code, ''), 'message', COALESCE(error_message, '')) END))
               ORDER BY seq) AS history
    FROM saga_steps GROUP BY saga_id
) h
WHERE h.saga_id = s.id;

DROP TABLE saga_steps;

-- +goose Down
LOCK TABLE sagas IN ACCESS EXCLUSIVE MODE;
CREATE TABLE saga_steps (
    saga_id       bigint      NOT NULL REFERENCES sagas (id) ON DELETE CASCADE,
    seq           int         NOT NULL,
    step          int         NOT NULL,
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
CREATE UNIQUE INDEX saga_steps_pending_idx ON saga_steps (saga_id, step, phase) WHERE status = 'pending';

INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts, error_code, error_message, finished_at)
SELECT s.id, e.ord, (e.r->>'step')::int, e.r->>'name', e.r->>'phase', e.r->>'status', (e.r->>'attempts')::int,
       NULLIF(e.r->'error'->>'code', ''), NULLIF(e.r->'error'->>'message', ''),
       CASE WHEN e.r->>'status' = 'pending' THEN NULL ELSE s.updated_at END
FROM sagas s, jsonb_array_elements(s.history) WITH ORDINALITY AS e(r, ord);

ALTER TABLE sagas DROP COLUMN history;
