-- Skip through, 2: record every seq from @from through @through that never arrived as skipped
-- by an operator (one that arrived keeps its row, and is sent); returns the seqs skipped.
INSERT INTO notify.notifications (user_id, seq, status, last_error, finished_at)
SELECT @user, s, 'skipped_by_operator', @reason, now() FROM generate_series(@from::bigint, @through::bigint) AS s
ON CONFLICT (user_id, seq) DO NOTHING
RETURNING seq
