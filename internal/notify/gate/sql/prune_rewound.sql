-- PruneRewound: delete up to @limit rows set aside from rewound histories more than
-- @window_us microseconds ago, oldest first, skipping rows others hold locked. No decision
-- of the gate reads them: they are the operator's record of what was never sent.
DELETE FROM notify.rewound WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM notify.rewound
	WHERE at < now() - @window_us::bigint * interval '1 microsecond'
	ORDER BY at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED))
