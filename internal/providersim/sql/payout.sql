-- Payout: record the payout of key @key (@payout_id, user @user_id, @amount in @currency to
-- @destination, in @status); a key seen before counts one more attempt, and a pending payout
-- asked more than @pending_attempts times is paid. Returns the row, its columns as
-- scanPayout reads them. Locks: the payouts row of @key.
INSERT INTO providersim.payouts (key, payout_id, user_id, amount, currency, destination, status)
VALUES (@key, @payout_id, @user_id, @amount, @currency, @destination, @status)
ON CONFLICT (key) DO UPDATE SET
    attempts = payouts.attempts + 1,
    status = CASE WHEN payouts.status = 'pending' AND payouts.attempts + 1 > @pending_attempts THEN 'paid' ELSE payouts.status END
RETURNING key, payout_id, user_id, amount, currency, destination, status, cancel_key, attempts, created_at
