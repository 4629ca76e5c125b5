-- Current epoch: the newest row of wallet_epochs (read after epoch_lock.sql, in its
-- transaction). Locks nothing.
SELECT epoch, minted_at, reason, COALESCE(fingerprint, '') FROM wallet_epochs ORDER BY epoch DESC LIMIT 1
