-- Allocate ids: take @n saga ids from the sagas' sequence in one round trip (the runner
-- keeps a block of them for the sagas it starts). Locks nothing (nextval is not
-- transactional).
SELECT nextval(pg_get_serial_sequence('sagas', 'id')) FROM generate_series(1, @n)
