-- Refund: refund the charge of key @key under @refund_key: a charged charge becomes refunded;
-- a key never charged is recorded voided (as @charge_id, the void's id), so that a charge
-- arriving later under it is refused. Returns the row, its columns as scanCharge reads them.
-- Locks: the charges row of @key.
INSERT INTO providersim.charges (key, charge_id, user_id, amount, currency, source, status, refund_key, attempts)
VALUES (@key, @charge_id, 0, 0, '', '', 'voided', @refund_key, 0)
ON CONFLICT (key) DO UPDATE SET
    status = CASE WHEN charges.status = 'charged' THEN 'refunded' ELSE charges.status END,
    refund_key = CASE WHEN charges.status = 'charged' THEN @refund_key ELSE charges.refund_key END
RETURNING key, charge_id, user_id, amount, currency, source, status, refund_key, attempts, created_at
