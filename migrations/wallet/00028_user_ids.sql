-- +goose Up
-- User ids that are never given twice, whatever rewinds the database. users.id was a
-- bigserial: a restore from a backup (pg_restore, a base backup, a point-in-time recovery)
-- brings the sequence back to its value in the backup, and the next sign-up took the id of a
-- user created after the backup, whom the restore lost. That user's tokens (their subject is
-- the id) then acted for the new user: read and moved the new user's money, and the notifier,
-- which keys everything by user id, mixed their SMS.
--
-- A new id is taken from the clock the database runs on, which a restore does not rewind:
-- the milliseconds since 2026-01-01 UTC in the high bits, 12 random bits below them. An id
-- minted after a restore is larger than every id minted before it, those the restore lost
-- included (unless the clock itself was set back across the restore). Two users in the same
-- millisecond differ in their random bits: new_user_id draws again an id it sees taken, and
-- when two transactions draw the same one at once (1 in 4,096 for two sign-ups in one
-- millisecond), the primary key refuses the second, which walletsvc sends again for a new id
-- (internal/wallet: the users_pkey violation). 41 bits of milliseconds last until
-- 2095-09-07; the largest id, 2^53 - 1, is an integer that JavaScript and every JSON reader
-- keeps exactly (the consoles, a client's app). The ids are still positive bigints: the
-- sharding key, the URLs and the notifier take them as they are.
--
-- The users already here keep their ids (the sequence's, far below those the clock gives:
-- about 2^47 by the end of 2026), so their tokens, URLs and SMS history stay theirs. Nothing
-- is rewritten: the column only gets a new default, and the sequence, no longer used, goes.
--
-- user_id_at is the layout, a function of the time and the low bits (for its tests, and for
-- whoever needs to tell when an id was minted: id >> 12 milliseconds after the epoch);
-- new_user_id is the default, on the clock and random bits. An insert that names its own id
-- (a test, an operator) is left alone.
-- +goose StatementBegin
CREATE FUNCTION user_id_at(at timestamptz, low integer) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    -- Milliseconds since 2026-01-01 00:00:00 UTC (1,767,225,600 s after the Unix epoch).
    ms bigint := floor(extract(epoch FROM at - to_timestamp(1767225600)) * 1000)::bigint;
BEGIN
    IF ms < 1 OR ms >= 2199023255552 THEN
        RAISE EXCEPTION 'no user id for the time %: user ids are minted from 2026-01-01 to 2095-09-07 UTC (is the database server''s clock right?)', at
            USING ERRCODE = 'datetime_field_overflow';
    END IF;
    IF low < 0 OR low > 4095 THEN
        RAISE EXCEPTION 'the low bits of a user id are 0 to 4095, got %', low
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    RETURN ms << 12 | low;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION new_user_id() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    candidate bigint;
BEGIN
    -- An id a user already has is drawn again: one committed, or one this transaction wrote
    -- (a statement that inserts many users sees the rows it inserted before). The clock moves
    -- on, so the draws end even when a millisecond's 4,096 ids are all taken. An id that a
    -- concurrent transaction, not committed yet, just took is not seen: the primary key
    -- refuses the second insert, and walletsvc sends it again.
    LOOP
        candidate := user_id_at(clock_timestamp(), floor(random() * 4096)::integer);
        EXIT WHEN NOT EXISTS (SELECT 1 FROM users WHERE id = candidate);
    END LOOP;
    RETURN candidate;
END
$$;
-- +goose StatementEnd

ALTER TABLE users ALTER COLUMN id SET DEFAULT new_user_id();
DROP SEQUENCE users_id_seq;

-- +goose Down
-- The sequence comes back after the largest id there is, so it gives none twice among the
-- users that exist; after a restore it gives again the ids the restore lost, as before.
CREATE SEQUENCE users_id_seq OWNED BY users.id;
SELECT setval('users_id_seq', COALESCE(max(id), 0) + 1, false) FROM users;
ALTER TABLE users ALTER COLUMN id SET DEFAULT nextval('users_id_seq');
DROP FUNCTION new_user_id();
DROP FUNCTION user_id_at(timestamptz, integer);
