-- Ledger sums: each wallet's balance beside the sum of its ledger (wallet database). No
-- arguments. Locks nothing.
SELECT w.user_id, w.balance, COALESCE((SELECT sum(amount) FROM ledger_entries l WHERE l.user_id = w.user_id), 0)
	FROM wallets w ORDER BY w.user_id
