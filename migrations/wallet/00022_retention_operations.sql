-- +goose NO TRANSACTION
-- +goose Up
-- Retention of the wallet's rows about its sagas (docs/ARCHITECTURE.md, Retention). When the
-- saga engine prunes a finished saga, the wallet marks the saga's operation row pruned in the
-- same transaction (pruned_at); the row stays RETENTION_OPERATIONS longer, so that the
-- saga's id answers 410 gone rather than 404, and is then deleted. A user's saga list reads
-- only rows not marked, on partial indexes, so it never walks the rows of pruned sagas. The
-- operator audit is pruned too, once its saga is no longer kept. Outside a transaction so
-- that each index is built CONCURRENTLY: the tables keep taking writes meanwhile.
ALTER TABLE wallet_operations ADD COLUMN IF NOT EXISTS pruned_at timestamptz;

-- Sagas pruned before this migration left their operation rows unmarked: mark them now.
-- (A replica of the previous version still pruning while this runs leaves the rows of what it
-- prunes unmarked: they still answer 410 and no list shows them, but a list walks them and
-- they are never deleted. Running this statement again once every replica runs this version
-- marks them.)
UPDATE wallet_operations o SET pruned_at = now()
    WHERE o.pruned_at IS NULL AND NOT EXISTS (SELECT 1 FROM sagas s WHERE s.id = o.saga_id);

-- A user's list: only the rows of kept sagas.
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_operations_user_kept_idx ON wallet_operations (user_id, saga_id DESC)
    WHERE pruned_at IS NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_operations_counterparty_kept_idx ON wallet_operations (counterparty_id, saga_id DESC)
    WHERE counterparty_id IS NOT NULL AND pruned_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS wallet_operations_user_idx;
DROP INDEX CONCURRENTLY IF EXISTS wallet_operations_counterparty_idx;
-- What retention deletes: the rows of pruned sagas, by when their saga was pruned.
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_operations_pruned_idx ON wallet_operations (pruned_at)
    WHERE pruned_at IS NOT NULL;
-- The operator audit, oldest first.
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_at_idx ON audit (at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS wallet_operations_pruned_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_operations_user_idx ON wallet_operations (user_id, saga_id DESC);
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_operations_counterparty_idx ON wallet_operations (counterparty_id, saga_id DESC)
    WHERE counterparty_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS wallet_operations_counterparty_kept_idx;
DROP INDEX CONCURRENTLY IF EXISTS wallet_operations_user_kept_idx;
-- The rows of pruned sagas stay, unmarked: they answer 410 as before this migration.
ALTER TABLE wallet_operations DROP COLUMN IF EXISTS pruned_at;
