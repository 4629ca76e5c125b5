-- DLQDepth: the dead letters no operator has replayed.
SELECT count(*) FROM notify.notifications n
WHERE n.status = 'dead_lettered'
  AND NOT EXISTS (SELECT 1 FROM notify.audit a WHERE a.user_id = n.user_id AND a.seq = n.seq AND a.action = @replay)
