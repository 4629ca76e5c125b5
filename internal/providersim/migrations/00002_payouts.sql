-- +goose Up
-- The gateway's payouts (withdrawals to a bank account), one row per idempotency key, so a
-- payout happens once.
CREATE TABLE providersim.payouts (
    key         text        PRIMARY KEY,
    payout_id   text        NOT NULL UNIQUE,
    user_id     bigint      NOT NULL,
    amount      bigint      NOT NULL,
    currency    text        NOT NULL,
    destination text        NOT NULL,
    status      text        NOT NULL CHECK (status IN ('paid', 'rejected', 'pending', 'cancelled', 'voided')),
    cancel_key  text        NOT NULL DEFAULT '',
    attempts    integer     NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- +goose Down
DROP TABLE providersim.payouts;
