-- Cancel payout: cancel the payout of key @key under @cancel_key: a pending payout becomes
-- cancelled; a key never paid out is recorded voided (as @payout_id, the void's id). Returns
-- the row, its columns as scanPayout reads them. Locks: the payouts row of @key.
INSERT INTO providersim.payouts (key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts)
VALUES (@key, @payout_id, 0, 0, '', '', 'voided', @cancel_key, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN payouts.status = 'pending' THEN 'cancelled' ELSE payouts.status END,
    cancel_key = CASE WHEN payouts.status = 'pending' THEN @cancel_key ELSE payouts.cancel_key END
RETURNING key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts, created_at
