-- +goose NO TRANSACTION
-- +goose Up
-- Retention (docs/ARCHITECTURE.md, Retention): the notifier's pruner deletes finished inbox
-- rows and SMS log rows once their window passes, in small batches; notify.progress, each
-- user's position at the gate, is never pruned. Built CONCURRENTLY, outside a transaction,
-- so that the tables keep taking writes meanwhile.

-- Finished inbox rows (sent, dead-lettered, skipped), oldest first. A record that finishes a
-- row is already a non-HOT update (status is in the predicates of other indexes).
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_finished ON notify.notifications (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS sms_log_sent_at ON notify.sms_log (sent_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notify.sms_log_sent_at;
DROP INDEX CONCURRENTLY IF EXISTS notify.notifications_finished;
