-- +goose NO TRANSACTION
-- +goose Up
-- Retention (docs/ARCHITECTURE.md, Retention): walletsvc's pruner deletes published outbox
-- rows, finished sagas with their history, and idempotency keys once their windows pass, in
-- small batches. Outside a transaction so that each index is built CONCURRENTLY: a table in
-- use keeps taking writes while it is built.

-- The saga engine owns sagas and saga_steps and prunes them through its own API; the
-- wallet's rows that name a saga keep its id, not a reference into the engine's table (which
-- would make the engine's prune fail, or reach into the wallet's rows). The ledger is never
-- pruned: a wallet's balance is the sum of its entries, for as long as the wallet exists.
ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_saga_id_fkey;
ALTER TABLE wallet_operations DROP CONSTRAINT IF EXISTS wallet_operations_saga_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_saga_id_fkey;
ALTER TABLE audit DROP CONSTRAINT IF EXISTS audit_saga_id_fkey;

-- Published outbox rows, oldest publication first. An unpublished row is never in it (the
-- pruner cannot even see one), and the mark that publishes a row is already a non-HOT update
-- (published_at is in the predicate of the unpublished index), so it adds one index entry.
CREATE INDEX CONCURRENTLY IF NOT EXISTS wallet_events_published_idx ON wallet_events (published_at)
    WHERE published_at IS NOT NULL;
-- Finished sagas, by when they finished (their last update). A saga that is running,
-- compensating or waiting for an operator (needs_attention) is never in it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS sagas_finished_idx ON sagas (updated_at)
    WHERE state IN ('completed', 'compensated', 'failed', 'resolved');
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_created_idx ON idempotency_keys (created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_created_idx;
DROP INDEX CONCURRENTLY IF EXISTS sagas_finished_idx;
DROP INDEX CONCURRENTLY IF EXISTS wallet_events_published_idx;
-- NOT VALID: rows whose saga was pruned keep their id; the references hold for new rows.
ALTER TABLE audit ADD CONSTRAINT audit_saga_id_fkey FOREIGN KEY (saga_id) REFERENCES sagas (id) NOT VALID;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_saga_id_fkey FOREIGN KEY (saga_id) REFERENCES sagas (id) NOT VALID;
ALTER TABLE wallet_operations ADD CONSTRAINT wallet_operations_saga_id_fkey FOREIGN KEY (saga_id) REFERENCES sagas (id) NOT VALID;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_saga_id_fkey FOREIGN KEY (saga_id) REFERENCES sagas (id) NOT VALID;
