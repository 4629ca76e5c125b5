-- +goose Up
-- Base of the schema: the notifier keeps its own tables in a schema of its own.
CREATE SCHEMA IF NOT EXISTS notify;

-- +goose Down
DROP SCHEMA IF EXISTS notify CASCADE;
