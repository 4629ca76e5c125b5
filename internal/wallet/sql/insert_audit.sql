-- Insert audit: record an operator action: @actor did @action on saga @saga_id for @reason,
-- with @detail (JSON, or NULL). Locks: the new audit row.
INSERT INTO audit (actor, action, saga_id, reason, detail) VALUES (@actor, @action, @saga_id, @reason, @detail)
