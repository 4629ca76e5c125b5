-- Try relay lock: take the session-level advisory lock @lock_key that keeps one relay
-- publishing per database, without waiting; returns whether it was taken.
--
-- Locks: the advisory lock, for the session (it lives and dies with the connection).
SELECT pg_try_advisory_lock(@lock_key)
