-- Skip, 4: the user stands at @last_seq, past the skipped seq; move it on past the finished
-- ones after it too. It is due.
WITH RECURSIVE run(s) AS (
	SELECT @last_seq::bigint
	UNION ALL
	SELECT n.seq FROM notify.notifications n JOIN run ON n.user_id = @user AND n.seq = run.s + 1
	WHERE n.status IN ('sent', 'dead_lettered', 'skipped_by_operator')
)
UPDATE notify.progress SET last_seq = (SELECT max(s) FROM run), due_at = now(),
	gap_since = NULL, updated_at = now()
WHERE user_id = @user
RETURNING last_seq
