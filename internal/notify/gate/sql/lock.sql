-- Lock: where users stand at the gate, their rows locked until the transaction ends, in user
-- order so that two records (of two replicas, after a lease passed) never deadlock. A
-- locked row is its newest version, which nobody else changes meanwhile: a record's fence is
-- decided on it.
SELECT user_id, last_seq, fence, lane_owner IS NOT NULL, epoch, epoch_since FROM notify.progress WHERE user_id = ANY(@users)
ORDER BY user_id
FOR UPDATE
