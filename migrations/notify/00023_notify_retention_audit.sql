-- +goose NO TRANSACTION
-- +goose Up
-- Retention of the notifier's last growing tables (docs/ARCHITECTURE.md, Retention): bad
-- messages once in the DLQ topic, by when they reached it (an intent not yet published is
-- never in this index), and the operators' audit trail, oldest first (a row whose SMS is
-- still in the inbox is kept: it is the replay count the dead-letter list and a replay's
-- fence read). Built CONCURRENTLY, outside a transaction, so the tables keep taking writes.
CREATE INDEX CONCURRENTLY IF NOT EXISTS bad_messages_published ON notify.bad_messages (dlq_published_at)
    WHERE dlq_published_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_at ON notify.audit (at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notify.audit_at;
DROP INDEX CONCURRENTLY IF EXISTS notify.bad_messages_published;
