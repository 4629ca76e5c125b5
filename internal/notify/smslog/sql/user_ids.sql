-- UserIDs: the users with notifications after the cursor's, by user id (on the primary key).
SELECT DISTINCT n.user_id
FROM notify.notifications n
WHERE n.user_id > @after_user
ORDER BY n.user_id
LIMIT @limit
