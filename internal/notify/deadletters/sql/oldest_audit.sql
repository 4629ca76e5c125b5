-- OldestAudit: how long ago, in seconds, the oldest audit row retention will one day prune
-- was recorded: one whose SMS is no longer in the inbox (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(a.at))::float8 FROM notify.audit a
WHERE NOT EXISTS (SELECT 1 FROM notify.notifications n WHERE n.user_id = a.user_id AND n.seq = a.seq)
