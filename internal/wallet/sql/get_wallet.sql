-- Get wallet: the wallet of user @user_id (no row: unknown user). Locks nothing.
SELECT balance, currency, event_seq FROM wallets WHERE user_id = @user_id
