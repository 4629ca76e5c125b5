-- Saga history: the tail of insert_saga.sql and update_saga.sql (store.go appends it to
-- each), after the saga's own CTE s. One element of the @step_* arrays per record; the first
-- record updates the open (pending) row of its step and phase if there is one, and every
-- other record is a new row, numbered after the saga's last (@id's). Locks the saga_steps
-- rows it updates or inserts.
, r AS (
    SELECT * FROM unnest(@step_steps::int[], @step_names::text[], @step_phases::text[], @step_statuses::text[], @step_attempts::int[], @step_error_codes::text[], @step_error_messages::text[])
        WITH ORDINALITY AS r(step, name, phase, status, attempts, error_code, error_message, ord)
), upd AS (
    UPDATE saga_steps st SET status = r.status, attempts = r.attempts,
        error_code = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_code, st.error_code) END,
        error_message = CASE WHEN r.status = 'done' THEN NULL ELSE COALESCE(r.error_message, st.error_message) END,
        finished_at = CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r
    WHERE r.ord = 1 AND st.saga_id = @id AND st.step = r.step AND st.phase = r.phase AND st.status = 'pending'
    RETURNING 1
), base AS (
    SELECT COALESCE(max(seq), 0) AS last FROM saga_steps WHERE saga_id = @id
), ins AS (
    INSERT INTO saga_steps (saga_id, seq, step, name, phase, status, attempts, error_code, error_message, finished_at)
    SELECT @id, base.last + row_number() OVER (ORDER BY r.ord), r.step, r.name, r.phase, r.status, r.attempts,
        r.error_code, r.error_message, CASE WHEN r.status = 'pending' THEN NULL ELSE now() END
    FROM r, base
    WHERE NOT (r.ord = 1 AND EXISTS (SELECT 1 FROM upd))
)
SELECT created_at, updated_at, step_since FROM s
