-- +goose Up
-- The payment gateway and merchant simulators left the product: they are a provider process
-- of their own (cmd/providersim), reached over HTTP, with their own schema and migrations.
-- Their tables in the product's database go.
DROP TABLE sim_outages;
DROP TABLE sim_orders;
DROP TABLE sim_charges;

-- +goose Down
-- As 00003_wallet.sql and 00007_inline_sagas.sql created them (empty: what they held is gone).
CREATE TABLE sim_charges (
    key         text        PRIMARY KEY,
    charge_id   text        NOT NULL UNIQUE,
    user_id     bigint      NOT NULL,
    amount      bigint      NOT NULL,
    currency    text        NOT NULL,
    source      text        NOT NULL,
    status      text        NOT NULL CHECK (status IN ('charged', 'declined', 'refunded')),
    attempts    integer     NOT NULL DEFAULT 1,
    refund_key  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    refunded_at timestamptz
);

CREATE TABLE sim_orders (
    key        text        PRIMARY KEY,
    order_id   text        NOT NULL UNIQUE,
    merchant   text        NOT NULL,
    reference  text        NOT NULL,
    amount     bigint      NOT NULL,
    currency   text        NOT NULL,
    status     text        NOT NULL CHECK (status IN ('pending', 'placed', 'rejected')),
    attempts   integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sim_outages (
    target text        PRIMARY KEY CHECK (target IN ('gateway', 'merchant')),
    mode   text        NOT NULL CHECK (mode IN ('fail', 'timeout')),
    until  timestamptz NOT NULL
);
