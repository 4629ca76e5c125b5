-- Wallet quiet: what the wallet has left to do: the sagas running or compensating, the
-- unpublished outbox rows, and each user with events and its last event's seq, as two
-- arrays in user order (wallet database). No arguments. Locks nothing.
SELECT
	(SELECT count(*) FROM sagas WHERE state IN ('running', 'compensating')),
	(SELECT count(*) FROM wallet_events WHERE published_at IS NULL),
	(SELECT COALESCE(array_agg(user_id ORDER BY user_id), '{}') FROM wallets WHERE event_seq > 0),
	(SELECT COALESCE(array_agg(event_seq ORDER BY user_id), '{}') FROM wallets WHERE event_seq > 0)
