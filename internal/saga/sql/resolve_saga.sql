-- Resolve saga: mark saga @id, in needs_attention (lock_saga.sql checked it), resolved by an
-- operator, with no lease.
--
-- Locks: the sagas row @id (already locked by lock_saga.sql).
UPDATE sagas SET state = 'resolved', lease_owner = NULL, updated_at = now()
WHERE id = @id
