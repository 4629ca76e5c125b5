-- Read durability: the server's fsync and synchronous_commit, as this session sees them. No
-- arguments. Locks nothing.
SELECT current_setting('fsync'), current_setting('synchronous_commit')
