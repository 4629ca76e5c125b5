-- Oldest audit: the age, in seconds, of the oldest audit row that retention will one day
-- prune: one whose saga is no longer kept (NULL when none). No arguments. Locks nothing.
SELECT EXTRACT(EPOCH FROM now() - min(a.at))::float8 FROM audit a
	WHERE NOT EXISTS (SELECT 1 FROM wallet_operations o WHERE o.saga_id = a.saga_id AND o.pruned_at IS NULL)
