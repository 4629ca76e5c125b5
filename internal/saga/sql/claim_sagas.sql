-- Claim sagas: lease to @owner, for @lease_secs seconds, up to @limit sagas of the kinds
-- @kinds that are due (backoff over) or whose lease expired, oldest due first, leaving out
-- the ids in @exclude (the runner holds them already): a new fence each, and the attempt
-- they are about to make counted, on the saga and on the open (pending) record of its step
-- in its history, which the claim returns for the runner to go on writing.
--
-- Locks: the claimed sagas rows (FOR UPDATE SKIP LOCKED: rows others hold are skipped).
WITH due AS (
    SELECT id FROM sagas
    WHERE state IN ('running', 'compensating') AND next_run_at <= now()
      AND kind = ANY(@kinds) AND id <> ALL(@exclude)
    ORDER BY next_run_at
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), open AS (
    -- The index (from 0) of the open record of each saga's current step, if any.
    SELECT s.id, (SELECT e.ord - 1 FROM jsonb_array_elements(s.history) WITH ORDINALITY AS e(r, ord)
                  WHERE e.r->>'status' = 'pending' AND (e.r->>'step')::int = s.step AND e.r->>'phase' = s.phase
                  ORDER BY e.ord DESC LIMIT 1) AS at
    FROM sagas s JOIN due ON due.id = s.id
)
UPDATE sagas s SET lease_owner = @owner, next_run_at = now() + make_interval(secs => @lease_secs),
    fence = s.fence + 1, attempts = s.attempts + 1, updated_at = now(),
    history = CASE WHEN open.at IS NULL THEN s.history
                   ELSE jsonb_set(s.history, ARRAY[open.at::text, 'attempts'], to_jsonb(s.attempts + 1)) END
FROM open WHERE s.id = open.id
RETURNING s.id, s.kind, s.state, s.step, s.phase, s.attempts, s.input, s.data, s.fence, s.step_since,
    s.error_code, s.error_message, COALESCE(s.traceparent, ''), s.key_nonce, s.history
