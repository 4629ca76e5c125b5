-- +goose Up
-- The provider simulator's own tables, in its own schema, under its own goose version table
-- (providersim.goose_db_version): they are not the product's, and the product's migrations
-- never touch them. One row per idempotency key, so a charge or an order happens once.
CREATE TABLE providersim.charges (
    key        text        PRIMARY KEY,
    charge_id  text        NOT NULL UNIQUE,
    user_id    bigint      NOT NULL,
    amount     bigint      NOT NULL,
    currency   text        NOT NULL,
    source     text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('charged', 'declined', 'refunded', 'voided')),
    refund_key text        NOT NULL DEFAULT '',
    attempts   integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE providersim.orders (
    key        text        PRIMARY KEY,
    order_id   text        NOT NULL UNIQUE,
    merchant   text        NOT NULL,
    reference  text        NOT NULL,
    amount     bigint      NOT NULL,
    currency   text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('placed', 'rejected', 'pending', 'cancelled', 'voided')),
    cancel_key text        NOT NULL DEFAULT '',
    attempts   integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- +goose Down
DROP TABLE providersim.orders;
DROP TABLE providersim.charges;
