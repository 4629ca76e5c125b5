-- Get wallets: the wallets of the users @user_ids, in no order (a missing one: unknown
-- user). Locks nothing.
SELECT user_id, balance, currency, event_seq FROM wallets WHERE user_id = ANY(@user_ids)
