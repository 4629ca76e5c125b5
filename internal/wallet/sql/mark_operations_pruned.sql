-- Mark operations pruned: mark the wallet's rows of the sagas @saga_ids pruned, in the
-- transaction in which the saga engine deletes those sagas: from that commit on, the saga's
-- id answers gone and no user's list reads the row. Locks: those wallet_operations rows.
UPDATE wallet_operations SET pruned_at = now() WHERE saga_id = ANY(@saga_ids) AND pruned_at IS NULL
