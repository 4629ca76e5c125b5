-- Get operation: the wallet's row of saga @saga_id (pruned or not; no row: unknown), its
-- columns as scanOperationRow reads them. Locks nothing.
SELECT saga_id, kind, user_id, COALESCE(counterparty_id, 0), amount, currency,
       COALESCE(merchant, ''), COALESCE(reference, ''), COALESCE(source, ''), COALESCE(destination, ''),
       pruned_at IS NOT NULL FROM wallet_operations WHERE saga_id = @saga_id
