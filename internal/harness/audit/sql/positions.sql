-- Positions: each user's position at the gate, the last seq it finished (notifier
-- database). No arguments. Locks nothing.
SELECT user_id, last_seq FROM notify.progress
