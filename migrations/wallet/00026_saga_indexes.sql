-- +goose NO TRANSACTION
-- +goose Up
-- One index of sagas by state instead of two: every saga write that changes the state (its
-- insert, and its last update, which can never be HOT since the state is indexed) wrote an
-- entry in both sagas_kind_state_created_idx (kind, state, created_at: read only by the
-- count by kind and state) and sagas_state_id_idx (state, id: the console's pages). The
-- index below serves both: a page of one state reads it backwards from the cursor, and the
-- count is an index-only scan of it (kind is included). Outside a transaction so that it is
-- built CONCURRENTLY: the table keeps taking writes meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS sagas_state_id_kind_idx ON sagas (state, id) INCLUDE (kind);
DROP INDEX CONCURRENTLY IF EXISTS sagas_state_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS sagas_kind_state_created_idx;
ALTER INDEX sagas_state_id_kind_idx RENAME TO sagas_state_id_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS sagas_kind_state_created_idx ON sagas (kind, state, created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS sagas_state_id_plain_idx ON sagas (state, id);
DROP INDEX CONCURRENTLY IF EXISTS sagas_state_id_idx;
ALTER INDEX sagas_state_id_plain_idx RENAME TO sagas_state_id_idx;
