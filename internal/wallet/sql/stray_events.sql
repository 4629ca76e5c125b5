-- Stray events: the user ids of up to @limit unpublished events, oldest first, written more
-- than @older_than_us microseconds ago, whose ids are not in @held: those the relay was not
-- handed or left behind. It reads the partial index of unpublished ids. Locks nothing.
SELECT user_id FROM wallet_events
WHERE published_at IS NULL AND id <> ALL(@held) AND occurred_at < now() - @older_than_us::bigint * interval '1 microsecond'
ORDER BY id
LIMIT @limit
