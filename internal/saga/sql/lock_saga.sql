-- Lock saga: read the state of saga @id and lock its row for the operator's retry or
-- resolve in the same transaction (no row: the saga does not exist).
--
-- Locks: the sagas row @id (FOR UPDATE), until the transaction ends.
SELECT state FROM sagas WHERE id = @id FOR UPDATE
