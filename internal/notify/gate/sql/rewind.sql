-- Rewind: the wallet began epoch @epoch at user @user's seq @since: what the gate holds of the
-- user from @since on is of a history the wallet no longer has. Its inbox rows and SMS log
-- rows from @since on move to notify.rewound (never sent from there), and the user stands in
-- the new epoch, just before @since at the latest, under a new fence (a lane that holds the
-- user records nothing more) and due, so its next SMS goes out. When anything moved, the
-- audit trail says so. Nothing happens when the user is in @epoch or a later one already (a
-- replica got there first). Returns the rows moved and whether the user's position moved
-- back.
-- Locks: the user's progress row, its inbox and SMS log rows from @since on.
WITH p AS (
	SELECT user_id, last_seq, epoch FROM notify.progress WHERE user_id = @user AND epoch < @epoch FOR UPDATE
), inbox AS (
	DELETE FROM notify.notifications n USING p
	WHERE n.user_id = p.user_id AND n.seq >= @since
	RETURNING n.user_id, n.seq, n.status, n.msg_id, n.event, n.text, p.epoch
), logged AS (
	DELETE FROM notify.sms_log l USING p
	WHERE l.user_id = p.user_id AND l.seq >= @since AND NOT l.late
	RETURNING l.user_id, l.seq, l.text, p.epoch
), kept AS (
	INSERT INTO notify.rewound (user_id, seq, what, status, epoch, by_epoch, msg_id, event, text)
	SELECT user_id, seq, 'inbox', status, epoch, @epoch, msg_id, event, text FROM inbox
	UNION ALL
	SELECT user_id, seq, 'sms_log', 'sent', epoch, @epoch, NULL, NULL, text FROM logged
	RETURNING 1
), moved AS (
	UPDATE notify.progress q SET epoch = @epoch, epoch_since = @since, last_seq = least(q.last_seq, @since - 1),
		fence = q.fence + 1, lane_owner = NULL, lane_until = NULL, due_at = now(), gap_since = NULL, updated_at = now()
	FROM p WHERE q.user_id = p.user_id
	RETURNING p.last_seq >= @since AS back, p.last_seq AS was, p.epoch AS from_epoch
), audited AS (
	INSERT INTO notify.audit (actor, action, user_id, seq, reason, detail)
	SELECT 'notifier', 'history_rewound', @user, @since,
		'the wallet''s history was rewound (a restore, a copy or a failover): what the gate held of it from this seq on is set aside, never sent',
		jsonb_build_object('from_epoch', m.from_epoch, 'to_epoch', @epoch::bigint, 'last_seq_was', m.was,
			'set_aside', (SELECT count(*) FROM inbox) + (SELECT count(*) FROM logged))
	FROM moved m
	WHERE m.back OR EXISTS (SELECT 1 FROM inbox) OR EXISTS (SELECT 1 FROM logged)
)
SELECT (SELECT count(*) FROM kept)::int, (SELECT count(*) FROM moved WHERE back)::int
