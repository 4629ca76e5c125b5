-- Get saga steps: the history of saga @saga_id, in the order it was written. Locks nothing.
SELECT name, phase, status, attempts, error_code, error_message
FROM saga_steps WHERE saga_id = @saga_id ORDER BY seq
