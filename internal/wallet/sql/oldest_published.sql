-- Oldest published: how long ago, in seconds, the oldest event still in the outbox was
-- published (NULL when none is). No arguments. Locks nothing.
SELECT EXTRACT(EPOCH FROM now() - min(published_at))::float8 FROM wallet_events WHERE published_at IS NOT NULL
