-- OldestInbox: how long ago, in seconds, the oldest finished inbox row finished (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(finished_at))::float8 FROM notify.notifications WHERE finished_at IS NOT NULL
