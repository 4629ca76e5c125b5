-- Cancel order: cancel the order of key @key under @cancel_key: a pending order becomes
-- cancelled; a key never placed is recorded voided (as @order_id, the void's id). Returns
-- the row, its columns as scanOrder reads them. Locks: the orders row of @key.
INSERT INTO providersim.orders (key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts)
VALUES (@key, @order_id, '', '', 0, '', 'voided', @cancel_key, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN orders.status = 'pending' THEN 'cancelled' ELSE orders.status END,
    cancel_key = CASE WHEN orders.status = 'pending' THEN @cancel_key ELSE orders.cancel_key END
RETURNING key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts, created_at
