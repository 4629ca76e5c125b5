-- Epoch fingerprint, on a server that refuses this role the control data and the WAL
-- position (some managed services): "-/-/<database oid>/<wallet_epochs oid>", which still
-- tells a dump restored into a new database, a copy, or a dump restored over this one.
-- Locks nothing.
SELECT concat_ws('/', '-', '-', (SELECT oid FROM pg_database WHERE datname = current_database()),
                 'wallet_epochs'::regclass::oid)
