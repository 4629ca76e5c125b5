-- Insert operation: the wallet's row of saga @saga_id (@kind, payer @user_id, payee
-- @counterparty_id or 0, @amount in @currency, @merchant, @reference, @source, @destination;
-- '' stores NULL), which is also the request's check: an unknown user (payer or payee) fails
-- its foreign keys, and when the credited wallet's (@credited, 0 for none) balance cannot
-- take the amount (beyond the largest bigint), the row is written with amount 0, which its
-- CHECK wallet_operations_amount_check refuses. Either way the saga's first commit fails
-- whole, before anything else took effect. @counterparty_id is cast: NULLIF would give it the
-- type of 0, an integer, which a user id (2^42 and more) does not fit.
--
-- Locks: the new wallet_operations row (and a share lock on the users rows its foreign keys
-- name).
INSERT INTO wallet_operations (saga_id, kind, user_id, counterparty_id, amount, currency, merchant, reference, source, destination)
SELECT @saga_id, @kind, @user_id, NULLIF(@counterparty_id::bigint, 0),
    CASE WHEN w.balance IS NULL OR w.balance <= 9223372036854775807 - @amount::bigint THEN @amount::bigint ELSE 0 END,
    @currency, NULLIF(@merchant, ''), NULLIF(@reference, ''), NULLIF(@source, ''), NULLIF(@destination, '')
FROM (SELECT 1) one LEFT JOIN wallets w ON w.user_id = @credited
