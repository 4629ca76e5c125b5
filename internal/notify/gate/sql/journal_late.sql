-- JournalLate: the late SMS log row of a replay, once per (user, seq).
INSERT INTO notify.sms_log (user_id, seq, phone, text, late)
VALUES (@user, @seq, @phone, @text, true)
ON CONFLICT (user_id, seq) WHERE late DO NOTHING
