-- Skip, 3: record the lost seq skipped by an operator.
INSERT INTO notify.notifications (user_id, seq, status, last_error, finished_at)
VALUES (@user, @seq, 'skipped_by_operator', @reason, now())
