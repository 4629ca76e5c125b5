-- Retry saga: send saga @id, in needs_attention (lock_saga.sql checked it), back to work on
-- its current step with a fresh window: running or compensating as its phase says, attempts
-- from 0, due now, no lease, and the failure that started the compensation (the last failed
-- forward record of its history) restored as its error.
--
-- Locks: the sagas row @id (already locked by lock_saga.sql).
WITH f AS (
	SELECT e.r->'error'->>'code' AS error_code, e.r->'error'->>'message' AS error_message
	FROM sagas s, jsonb_array_elements(s.history) WITH ORDINALITY AS e(r, ord)
	WHERE s.id = @id AND e.r->>'phase' = 'forward' AND e.r->>'status' = 'failed'
	ORDER BY e.ord DESC LIMIT 1
)
UPDATE sagas SET
	state = CASE WHEN phase = 'forward' THEN 'running' ELSE 'compensating' END,
	attempts = 0, next_run_at = now(), step_since = now(), lease_owner = NULL, updated_at = now(),
	error_code = COALESCE((SELECT error_code FROM f), error_code),
	error_message = COALESCE((SELECT error_message FROM f), error_message)
WHERE id = @id
