-- View: the users that started at a baseline, newest first.
SELECT user_id, baseline_seq, baseline_at FROM notify.progress
WHERE baseline_seq IS NOT NULL ORDER BY baseline_at DESC, user_id LIMIT @limit
