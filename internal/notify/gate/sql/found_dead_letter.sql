-- FoundDeadLetter: record (user, seq), found in the DLQ topic and not finished at the gate,
-- as dead-lettered and published, unless the inbox has it (pending or finished); wake its
-- user so a lane moves past it.
WITH ins AS (
	INSERT INTO notify.notifications (user_id, seq, status, msg_id, event, kind, text, last_error, finished_at, dlq_published_at)
	VALUES (@user, @seq, 'dead_lettered', @msg_id, @event::jsonb, @kind, @text, @reason, now(), now())
	ON CONFLICT (user_id, seq) DO NOTHING
	RETURNING user_id
), fresh AS (
	INSERT INTO notify.progress (user_id, due_at)
	SELECT user_id, now() FROM ins
	ON CONFLICT (user_id) DO NOTHING
), woken AS (
	INSERT INTO notify.wakes (user_id) SELECT user_id FROM ins
)
SELECT EXISTS (SELECT 1 FROM ins)
