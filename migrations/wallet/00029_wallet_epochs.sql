-- +goose Up
-- The wallet's epochs (docs/ARCHITECTURE.md, "When history rewinds"). A user's seqs and the
-- event ids are handed out by this database: a restore, a point-in-time recovery, a copy or
-- a failover that lost commits hands them out again, and the notifier, which keeps its own
-- database, would take the new events for ones it has finished. An epoch names one unbroken
-- history of this database: every event carries the epoch it was written in and its user's
-- first seq in that epoch (epoch_since), so (epoch, user, seq) never repeats and the
-- notifier can tell a new event from an old one, and an old event from a rewound one.
--
-- wallet_epochs has one row per epoch, the newest being the current one. An epoch is a
-- number of microseconds since 1970 at its minting (at least one more than the one before),
-- so a later epoch is larger than every epoch minted before it, also those of a history the
-- database no longer remembers; it stays below 2^53, exact in JSON readers. fingerprint is
-- what the database looked like to the epoch check (internal/wallet/epoch.go): its system
-- identifier, timeline, database oid and this table's oid; a restore or failover changes one
-- of them, and the check mints a new epoch. NULL until the first check records it.
CREATE TABLE wallet_epochs (
    epoch       bigint      PRIMARY KEY CHECK (epoch > 0),
    minted_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason      text        NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 500),
    fingerprint text
);
INSERT INTO wallet_epochs (epoch, reason)
VALUES (floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 'created');

-- A wallet's epoch is that of its latest event (0: none since this migration), and
-- epoch_since its first seq in that epoch. The first change of a wallet in a new epoch sets
-- both under the wallet's row lock, in the statement that hands out the seq (apply_change).
-- Events keep both. Constant defaults: nothing is rewritten.
ALTER TABLE wallets ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
                    ADD COLUMN epoch_since bigint NOT NULL DEFAULT 1;
ALTER TABLE wallet_events ADD COLUMN epoch bigint NOT NULL DEFAULT 0,
                          ADD COLUMN epoch_since bigint NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE wallet_events DROP COLUMN epoch, DROP COLUMN epoch_since;
ALTER TABLE wallets DROP COLUMN epoch, DROP COLUMN epoch_since;
DROP TABLE wallet_epochs;
