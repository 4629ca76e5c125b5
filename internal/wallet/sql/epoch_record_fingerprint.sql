-- Record fingerprint: the first check of epoch @epoch records what the database looks like.
-- Locks: that row.
UPDATE wallet_epochs SET fingerprint = @fingerprint WHERE epoch = @epoch
