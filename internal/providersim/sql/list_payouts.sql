-- List payouts: every payout, oldest first, its columns as scanPayout reads them. No
-- arguments. Locks nothing.
SELECT key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts, created_at FROM providersim.payouts ORDER BY created_at, key
