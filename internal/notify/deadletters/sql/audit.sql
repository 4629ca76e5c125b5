-- Audit: record an operator's action, who and why.
INSERT INTO notify.audit (actor, action, user_id, seq, reason, detail)
VALUES (@actor, @action, @user, @seq, @reason, @detail)
RETURNING at
