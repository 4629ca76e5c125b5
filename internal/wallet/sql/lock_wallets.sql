-- Lock wallets: lock the wallets of the users @user_ids, in user-id order, before a balance
-- change (apply_change.sql) of one of them: a transfer locks both of its wallets so that two
-- opposite transfers cannot deadlock.
--
-- Locks: those wallets rows (FOR UPDATE), until the transaction ends.
SELECT 1 FROM wallets WHERE user_id = ANY(@user_ids) ORDER BY user_id FOR UPDATE
