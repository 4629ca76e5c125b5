-- Superseded: arrivals of a history the wallet rewound (an earlier epoch, from the user's
-- current epoch's first seq on), set aside in notify.rewound, never sent; @by_epochs is
-- each one's user's current epoch.
-- Locks: nothing but the new rows.
INSERT INTO notify.rewound (user_id, seq, what, epoch, by_epoch, msg_id, event, text)
SELECT a.user_id, a.seq, 'arrival', a.epoch, a.by_epoch, a.msg_id, a.event, a.text
FROM unnest(@users::bigint[], @seqs::bigint[], @epochs::bigint[], @by_epochs::bigint[], @msg_ids::text[], @events::jsonb[], @texts::text[])
	AS a(user_id, seq, epoch, by_epoch, msg_id, event, text)
