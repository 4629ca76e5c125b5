-- Outbox backlog: how many events are unpublished, and how long ago, in seconds, the oldest
-- of them happened (0 when none); the partial index on unpublished rows keeps it cheap. No
-- arguments. Locks nothing.
SELECT (SELECT count(*) FROM wallet_events WHERE published_at IS NULL),
	COALESCE((SELECT EXTRACT(EPOCH FROM now() - occurred_at)::float8 FROM wallet_events
	          WHERE published_at IS NULL ORDER BY id LIMIT 1), 0)
