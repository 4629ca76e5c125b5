-- Epoch lock: the transaction-level advisory lock @lock_key, so that replicas checking at
-- once take turns and mint one epoch between them. A statement of its own: a statement's
-- snapshot is taken before it waits for the lock, so the read after it must be another.
SELECT pg_advisory_xact_lock(@lock_key::bigint)
