-- List orders: every order, oldest first, its columns as scanOrder reads them. No arguments.
-- Locks nothing.
SELECT key, order_id, merchant, reference, amount, currency, status, cancel_key, attempts, created_at FROM providersim.orders ORDER BY created_at, key
