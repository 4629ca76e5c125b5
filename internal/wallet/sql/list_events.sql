-- List events: up to @limit of user @user_id's balance events (the outbox rows, published or
-- not) with a seq above @after_seq, in seq order. Locks nothing.
SELECT id, user_id, seq, kind, amount, currency, balance_after, saga_id, occurred_at, published_at IS NOT NULL
FROM wallet_events
WHERE user_id = @user_id AND seq > @after_seq
ORDER BY seq
LIMIT @limit
