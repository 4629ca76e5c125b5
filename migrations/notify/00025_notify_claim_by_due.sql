-- +goose Up
-- Claims that cost what they claim. A claim used to read every wake row ahead of the idle
-- users it took (the rows of leased users stayed, marked with the claim's fence, so that a
-- lane that died left its user claimable), and marked each claimed user's rows: with a
-- backlog it read and wrote far more than the users it took. Now every leased user is due at
-- its lease's end (due_at, set by the claim), which brings it back should its lane die, and
-- a claim deletes the wake rows of the users it claims and of users that have a due_at
-- (whatever makes them idle later reads the inbox under their lock): the wake rows ahead of
-- an idle user's news are only those of users a statement holds at that moment. The mark is
-- gone, and with it the room kept on each page for it.
UPDATE notify.progress SET due_at = lane_until WHERE lane_owner IS NOT NULL AND due_at IS NULL;
ALTER TABLE notify.wakes DROP COLUMN fence;
ALTER TABLE notify.wakes RESET (fillfactor);

-- +goose Down
ALTER TABLE notify.wakes ADD COLUMN fence bigint;
ALTER TABLE notify.wakes SET (fillfactor = 80);
