-- Lock: take the advisory lock of a consumer's name for this session, without waiting.
SELECT pg_try_advisory_lock(@key)
