-- Claim sagas: lease to @owner, for @lease_secs seconds, up to @limit sagas of the kinds
-- @kinds that are due (backoff over) or whose lease expired, oldest due first, leaving out
-- the ids in @exclude (the runner holds them already): a new fence each, and the attempt
-- they are about to make counted, on the saga and on its open step row.
--
-- Locks: the claimed sagas rows (FOR UPDATE SKIP LOCKED: rows others hold are skipped) and
-- their open saga_steps rows.
WITH due AS (
    SELECT id FROM sagas
    WHERE state IN ('running', 'compensating') AND next_run_at <= now()
      AND kind = ANY(@kinds) AND id <> ALL(@exclude)
    ORDER BY next_run_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), c AS (
    UPDATE sagas s SET lease_owner = @owner, next_run_at = now() + make_interval(secs => @lease_secs),
        fence = s.fence + 1, attempts = s.attempts + 1, updated_at = now()
    FROM due WHERE s.id = due.id
    RETURNING s.id, s.kind, s.state, s.step, s.phase, s.attempts, s.input, s.data, s.fence, s.step_since,
        s.error_code, s.error_message, COALESCE(s.traceparent, ''), s.key_nonce
), h AS (
    UPDATE saga_steps st SET attempts = c.attempts
    FROM c WHERE st.saga_id = c.id AND st.step = c.step AND st.phase = c.phase AND st.status = 'pending'
)
SELECT * FROM c
