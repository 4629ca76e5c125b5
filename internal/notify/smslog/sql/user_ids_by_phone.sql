-- UserIDsByPhone: the users with an event addressed to @phone after the cursor's, by user id
-- (on notifications_phone).
SELECT DISTINCT n.user_id
FROM notify.notifications n
WHERE n.event->>'phone' = @phone AND n.user_id > @after_user
ORDER BY n.user_id
LIMIT @limit
