-- Stuck sagas: every saga not completed, compensated or failed (needs_attention included),
-- by id, with its error code (wallet database). No arguments. Locks nothing.
SELECT id, state, COALESCE(error_code, '') FROM sagas
	WHERE state NOT IN ('completed', 'compensated', 'failed') ORDER BY id
