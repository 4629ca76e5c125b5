-- Try adopt lock: take the sequence's advisory lock @lock_id for the adopting transaction,
-- without waiting; returns whether it was taken. Locks: the advisory lock, until the
-- transaction ends.
SELECT pg_try_advisory_xact_lock(@lock_id)
