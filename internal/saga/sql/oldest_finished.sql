-- Oldest finished: how long ago, in seconds, the oldest finished saga still kept finished
-- (NULL when none is). The states are those of prune_finished.sql. No arguments. Locks
-- nothing.
SELECT EXTRACT(EPOCH FROM now() - min(updated_at))::float8 FROM sagas
	WHERE state IN ('completed', 'compensated', 'failed', 'resolved')
