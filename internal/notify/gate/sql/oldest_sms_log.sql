-- OldestSMSLog: how long ago, in seconds, the oldest SMS log row was written (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(sent_at))::float8 FROM notify.sms_log
