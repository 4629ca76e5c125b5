-- +goose Up
-- The notifier keeps its tables in a schema of its own, notify, which may live in the wallet's
-- database or in one of its own (NOTIFY_DATABASE_URL). Migrate creates the schema before goose
-- runs (this sequence's version table, notify.goose_db_version, lives in it); this migration
-- only says so, for a database migrated before that.
CREATE SCHEMA IF NOT EXISTS notify;

-- +goose Down
-- The schema stays: it holds this sequence's own version table.
