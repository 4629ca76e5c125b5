-- Saga audit: the operator actions recorded on saga @saga_id, oldest first. Locks nothing.
SELECT id, at, actor, action, saga_id, reason FROM audit WHERE saga_id = @saga_id ORDER BY id
