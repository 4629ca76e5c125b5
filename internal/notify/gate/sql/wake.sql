-- Wake: news for a user, which a claim takes when the user is idle.
INSERT INTO notify.wakes (user_id) VALUES (@user)
