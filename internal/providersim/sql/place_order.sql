-- Place order: record the order of key @key (@order_id, @merchant, @reference, @amount in
-- @currency, in @status); a key seen before counts one more attempt, and a pending order
-- asked more than @pending_attempts times is placed. Returns the row, its columns as
-- scanOrder reads them. Locks: the orders row of @key.
INSERT INTO providersim.orders (key, order_id, merchant, reference, amount, currency, status)
VALUES (@key, @order_id, @merchant, @reference, @amount, @currency, @status)
ON CONFLICT (key) DO UPDATE SET
    attempts = orders.attempts + 1,
    status = CASE WHEN orders.status = 'pending' AND orders.attempts + 1 > @pending_attempts THEN 'placed' ELSE orders.status END
RETURNING key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts, created_at
