-- OldestWake: the age, in seconds, of the oldest wake row (NULL: none).
SELECT EXTRACT(EPOCH FROM now() - min(at))::float8 FROM notify.wakes
