-- +goose Up
-- The operator console lists sagas by state, newest first, a page at a time: on this index
-- a page of needs_attention (or of any state) reads that page, not every saga to find it.
CREATE INDEX sagas_state_id_idx ON sagas (state, id);

-- +goose Down
DROP INDEX sagas_state_id_idx;
