-- Notify unfinished: how many events of the users @users (each with @events events, the
-- arrays of wallet_quiet.sql) the gate has not finished yet, by each user's position, and
-- how many inbox rows are pending (notifier database). Locks nothing.
SELECT
	COALESCE((SELECT sum(u.events - LEAST(u.events, COALESCE((SELECT p.last_seq FROM notify.progress p WHERE p.user_id = u.user_id), 0)))
		FROM unnest(@users::bigint[], @events::bigint[]) AS u(user_id, events)), 0),
	(SELECT count(*) FROM notify.notifications WHERE status = 'pending')
