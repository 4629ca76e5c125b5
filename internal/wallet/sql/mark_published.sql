-- Mark published: record that events @ids[i] were sent as broker messages @msg_ids[i].
-- Marking an event already published keeps the first time and message id. An UPDATE … FROM
-- updates a row once however many source rows match it, so an id given twice counts once:
-- the first of its message ids is taken. An id no longer in the outbox matches nothing.
--
-- Locks: those wallet_events rows.
UPDATE wallet_events e
SET published_at = COALESCE(e.published_at, now()), msg_id = COALESCE(e.msg_id, v.msg_id)
FROM (SELECT DISTINCT ON (id) id, msg_id FROM unnest(@ids::bigint[], @msg_ids::text[]) WITH ORDINALITY AS u(id, msg_id, n)
      ORDER BY id, n) AS v
WHERE e.id = v.id
