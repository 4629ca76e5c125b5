-- Balance events: every outbox row by (user, seq), with its phone and the balance after it
-- as an SMS states it ("154.04 CNY") (wallet database). No arguments. Locks nothing.
SELECT user_id, seq, phone,
	to_char(balance_after / 100.0, 'FM9999999999999999990.00') || ' ' || currency
	FROM wallet_events ORDER BY user_id, seq
