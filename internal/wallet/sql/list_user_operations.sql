-- List user operations: up to @limit of the wallet's rows of kept sagas in which user
-- @user_id pays or receives, with a saga id below @before (the cursor), newest first, their
-- columns as scanOperationRow reads them. The rows where the user pays and those where it
-- receives are each read newest first on their own partial index of kept sagas' rows
-- (wallet_operations_user_kept_idx, _counterparty_kept_idx), at most @limit of each, then
-- merged: whatever the planner estimates, it reads about a page, never the rows of pruned
-- sagas, nor the rows above the cursor. (A transfer to oneself is refused, so no row is in
-- both.) Locks nothing.
SELECT saga_id, kind, user_id, COALESCE(counterparty_id, 0), amount, currency,
       COALESCE(merchant, ''), COALESCE(reference, ''), COALESCE(source, ''), COALESCE(destination, ''),
       pruned_at IS NOT NULL FROM (
    (SELECT * FROM wallet_operations
     WHERE user_id = @user_id AND pruned_at IS NULL AND saga_id < @before
     ORDER BY saga_id DESC LIMIT @limit)
    UNION ALL
    (SELECT * FROM wallet_operations
     WHERE counterparty_id = @user_id AND pruned_at IS NULL AND saga_id < @before
     ORDER BY saga_id DESC LIMIT @limit)
) o
ORDER BY saga_id DESC
LIMIT @limit
