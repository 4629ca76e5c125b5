-- Mint epoch: begin a new epoch, the microseconds since 1970 now, and at least one more
-- than every epoch this database remembers, with its @reason and @fingerprint. Locks: the
-- new row.
INSERT INTO wallet_epochs (epoch, reason, fingerprint)
SELECT greatest(max(epoch) + 1, floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint), @reason, NULLIF(@fingerprint, '')
FROM wallet_epochs
RETURNING epoch, minted_at, reason
