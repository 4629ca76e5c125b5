-- Version tables: whether the sequence's own version table @table exists, and whether the
-- combined sequence's (public.goose_db_version) does. Locks nothing.
SELECT to_regclass(@table) IS NOT NULL, to_regclass('public.goose_db_version') IS NOT NULL
