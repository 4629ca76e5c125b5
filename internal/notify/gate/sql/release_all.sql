-- ReleaseAll: give back every user leased by @owner, due at once.
UPDATE notify.progress SET lane_owner = NULL, lane_until = NULL, due_at = now(), updated_at = now()
WHERE lane_owner = @owner
