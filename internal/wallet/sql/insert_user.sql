-- Insert user: a new user (@name, @phone, @locale) and its wallet in @currency, empty, in one
-- statement; returns both. The id is the column's default, new_user_id(): the clock and
-- random bits, so an id already taken fails users_pkey, and the statement is sent again.
-- Locks: the new users and wallets rows.
WITH u AS (
    INSERT INTO users (name, phone, locale) VALUES (@name, @phone, @locale)
    RETURNING id, name, phone, locale, created_at
), w AS (
    INSERT INTO wallets (user_id, currency) SELECT id, @currency FROM u
    RETURNING user_id, balance, currency, event_seq
)
SELECT u.id, u.name, u.phone, u.locale, u.created_at, w.balance, w.currency, w.event_seq
FROM u JOIN w ON w.user_id = u.id
