-- Epoch fingerprint: what the database looks like to the epoch check, as
-- "<system identifier>/<timeline>/<database oid>/<wallet_epochs oid>". A restore into a new
-- cluster changes the system identifier; a point-in-time recovery or a standby's promotion
-- the timeline (the current WAL file's, which moves at once, where the last checkpoint's
-- would lag); a dump restored into a new database, or a copy, the database oid; a dump
-- restored over this database (pg_restore --clean) the table's oid. Locks nothing.
SELECT concat_ws('/', (SELECT system_identifier FROM pg_control_system()),
                 substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8),
                 (SELECT oid FROM pg_database WHERE datname = current_database()),
                 'wallet_epochs'::regclass::oid)
