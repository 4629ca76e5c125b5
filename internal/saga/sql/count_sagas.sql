-- Count sagas: how many sagas there are of each kind and state (an index-only scan of
-- sagas_state_id_idx, which includes kind). No arguments. Locks nothing.
SELECT kind, state, count(*) FROM sagas GROUP BY kind, state ORDER BY kind, state
