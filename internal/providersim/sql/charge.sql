-- Charge: record the charge of key @key (@charge_id, user @user_id, @amount in @currency from
-- @source, in @status); a key seen before counts one more attempt and keeps what it has.
-- Returns the row, its columns as scanCharge reads them. Locks: the charges row of @key.
INSERT INTO providersim.charges (key, charge_id, user_id, amount, currency, source, status)
VALUES (@key, @charge_id, @user_id, @amount, @currency, @source, @status)
ON CONFLICT (key) DO UPDATE SET attempts = charges.attempts + 1
RETURNING key, charge_id, user_id, amount, currency, source, status, refund_key, attempts, created_at
