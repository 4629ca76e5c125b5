-- Count sagas: how many sagas there are of each kind and state (an index-only scan of
-- sagas_kind_state_created_idx). No arguments. Locks nothing.
SELECT kind, state, count(*) FROM sagas GROUP BY kind, state ORDER BY kind, state
