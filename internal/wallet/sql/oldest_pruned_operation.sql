-- Oldest pruned operation: how long ago, in seconds, the oldest operation row still kept had
-- its saga pruned (NULL when none). No arguments. Locks nothing.
SELECT EXTRACT(EPOCH FROM now() - min(pruned_at))::float8 FROM wallet_operations
	WHERE pruned_at IS NOT NULL
