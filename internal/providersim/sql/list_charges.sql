-- List charges: every charge, oldest first, its columns as scanCharge reads them. No
-- arguments. Locks nothing.
SELECT key, charge_id, user_id, amount, currency, source, status, refund_key, attempts, created_at FROM providersim.charges ORDER BY created_at, key
