-- Wallet counts: how many users there are, and how many outbox rows are unpublished (wallet
-- database). No arguments. Locks nothing.
SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM wallet_events WHERE published_at IS NULL)
