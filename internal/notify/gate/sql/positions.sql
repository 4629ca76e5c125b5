-- Positions: where users stand at the gate. A plain read: it locks nothing, so an inbox write
-- never waits for a lane recording one of them.
SELECT user_id, last_seq, fence, lane_owner IS NOT NULL, epoch, epoch_since FROM notify.progress WHERE user_id = ANY(@users)
