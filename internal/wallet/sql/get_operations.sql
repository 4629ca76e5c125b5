-- Get operations: the wallet's rows of the sagas @saga_ids (an id without one is left out),
-- their columns as scanOperationRow reads them. Locks nothing.
SELECT saga_id, kind, user_id, COALESCE(counterparty_id, 0), amount, currency,
       COALESCE(merchant, ''), COALESCE(reference, ''), COALESCE(source, ''), COALESCE(destination, ''),
       pruned_at IS NOT NULL FROM wallet_operations WHERE saga_id = ANY(@saga_ids)
