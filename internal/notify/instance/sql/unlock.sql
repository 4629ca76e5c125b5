-- Unlock: give the advisory lock of a consumer's name back.
SELECT pg_advisory_unlock(@key)
