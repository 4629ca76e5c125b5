-- +goose Up
-- The relay publishes each broker queue's events through a pump of its own, which reads
-- only its queue's rows with a cursor of its own.
--
-- key_hash is the Java client's String.hashCode of the user id in decimal, the sharding key
-- of every event (SelectMessageQueueByHash puts it on queue abs(key_hash % n) of n): a pump
-- keeps the rows of its queue, whatever the number of queues, and the relay configured with
-- the Go client's FNV hash instead uses wallet_key_hash_fnv(user_id) % n. Generated, so the
-- wallet's insert is unchanged, and every existing row gets it.
--
-- xact is the id of the transaction that wrote the row. Ids are taken before commit, so a
-- row can commit after a pump's cursor passed its id: a row not yet visible to a read was
-- written by a transaction still running then, whose id is at least that read's
-- pg_snapshot_xmin, which the next read looks for below its cursor. Existing rows get the id
-- of this migration's transaction, committed before any read of the new relay.
-- +goose StatementBegin
CREATE FUNCTION wallet_key_hash(user_id bigint) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    s text := user_id::text;
    h bigint := 0;
BEGIN
    -- s[0]*31^(n-1) + ... + s[n-1] modulo 2^32, read as a signed 32-bit int (ASCII: one
    -- UTF-16 code unit per character).
    FOR i IN 1..length(s) LOOP
        h := (h * 31 + ascii(substr(s, i, 1))) % 4294967296;
    END LOOP;
    IF h >= 2147483648 THEN
        h := h - 4294967296;
    END IF;
    RETURN h::integer;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION wallet_key_hash_fnv(user_id bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    s text := user_id::text;
    h bigint := 2166136261;
BEGIN
    -- FNV-1a 32 of the decimal text's bytes, 0 .. 2^32-1.
    FOR i IN 1..length(s) LOOP
        h := ((h # ascii(substr(s, i, 1))) * 16777619) % 4294967296;
    END LOOP;
    RETURN h;
END
$$;
-- +goose StatementEnd

ALTER TABLE wallet_events
    ADD COLUMN key_hash integer GENERATED ALWAYS AS (wallet_key_hash(user_id)) STORED,
    ADD COLUMN xact xid8 NOT NULL DEFAULT pg_current_xact_id();
-- A pump's late rows: unpublished rows of transactions that were still running.
CREATE INDEX wallet_events_unpublished_xact_idx ON wallet_events (xact) WHERE published_at IS NULL;

-- +goose Down
DROP INDEX wallet_events_unpublished_xact_idx;
ALTER TABLE wallet_events DROP COLUMN xact, DROP COLUMN key_hash;
DROP FUNCTION wallet_key_hash_fnv(bigint);
DROP FUNCTION wallet_key_hash(bigint);
