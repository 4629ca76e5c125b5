-- Ended sagas: those of the ids @ids that are in a terminal state or do not exist (the
-- waiters' re-check). Locks nothing.
SELECT w.id FROM unnest(@ids::bigint[]) AS w(id)
WHERE NOT EXISTS (SELECT 1 FROM sagas s WHERE s.id = w.id AND s.state IN ('running', 'compensating'))
