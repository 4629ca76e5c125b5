-- +goose Up
-- The wallet: users, wallets, the ledger, the transactional outbox (wallet_events), the
-- wallet's view of its sagas, idempotency keys, and the tables of the built-in payment
-- gateway and merchant simulators.

-- Phone is NOT unique: it is where SMS go, not an identity (no login here), and several
-- accounts may share one number (a family, a shop's till phone, demo scripts). Uniqueness
-- would turn a harmless duplicate sign-up into a 409 and leak whether a number is known.
CREATE TABLE users (
    id         bigserial   PRIMARY KEY,
    name       text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    phone      text        NOT NULL CHECK (phone ~ '^\+[1-9][0-9]{7,14}$'),
    locale     text        NOT NULL DEFAULT 'zh-CN' CHECK (locale IN ('zh-CN', 'en')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX users_phone_idx ON users (phone);

-- event_seq is the last seq handed out to this user's events; it only moves under the row
-- lock, in the transaction that inserts the event, so seqs are 1, 2, 3… without gaps.
CREATE TABLE wallets (
    user_id    bigint      PRIMARY KEY REFERENCES users (id),
    currency   text        NOT NULL DEFAULT 'CNY' CHECK (currency ~ '^[A-Z]{3}$'),
    balance    bigint      NOT NULL DEFAULT 0 CHECK (balance >= 0),
    event_seq  bigint      NOT NULL DEFAULT 0 CHECK (event_seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per balance change. UNIQUE (saga_id, step, user_id): a saga step can change a
-- given wallet at most once, whatever retries or crashes happen.
CREATE TABLE ledger_entries (
    id            bigserial   PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES wallets (user_id),
    saga_id       bigint      NOT NULL REFERENCES sagas (id),
    step          text        NOT NULL,
    amount        bigint      NOT NULL CHECK (amount <> 0),
    balance_after bigint      NOT NULL CHECK (balance_after >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_entries_step_once UNIQUE (saga_id, step, user_id)
);
CREATE INDEX ledger_entries_user_idx ON ledger_entries (user_id, id);

-- The transactional outbox: one row per balance change, with phone and locale as they were
-- when it happened (the SMS goes where the user said at that time).
CREATE TABLE wallet_events (
    id            bigserial   PRIMARY KEY,
    user_id       bigint      NOT NULL REFERENCES wallets (user_id),
    seq           bigint      NOT NULL CHECK (seq > 0),
    kind          text        NOT NULL CHECK (kind IN ('deposit', 'purchase', 'refund', 'transfer_out', 'transfer_in', 'reversal')),
    amount        bigint      NOT NULL CHECK (amount <> 0),
    currency      text        NOT NULL,
    balance_after bigint      NOT NULL CHECK (balance_after >= 0),
    saga_id       bigint      NOT NULL,
    phone         text        NOT NULL,
    locale        text        NOT NULL,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz,
    msg_id        text,
    CONSTRAINT wallet_events_user_seq UNIQUE (user_id, seq)
);
-- The relay's work queue: small, because published rows leave it.
CREATE INDEX wallet_events_unpublished_idx ON wallet_events (id) WHERE published_at IS NULL;

-- The wallet's view of each of its sagas, for the API (who, how much, with whom).
CREATE TABLE wallet_operations (
    saga_id         bigint      PRIMARY KEY REFERENCES sagas (id),
    kind            text        NOT NULL CHECK (kind IN ('deposit', 'purchase', 'transfer')),
    user_id         bigint      NOT NULL REFERENCES users (id),
    counterparty_id bigint      REFERENCES users (id),
    amount          bigint      NOT NULL CHECK (amount > 0),
    currency        text        NOT NULL,
    merchant        text,
    reference       text,
    source          text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wallet_operations_user_idx ON wallet_operations (user_id, saga_id DESC);
CREATE INDEX wallet_operations_counterparty_idx ON wallet_operations (counterparty_id, saga_id DESC)
    WHERE counterparty_id IS NOT NULL;

-- Idempotency-Key header, scoped per user (the payer for transfers). request_hash is a
-- SHA-256 of the operation and its normalised fields: same key + other body → 422.
CREATE TABLE idempotency_keys (
    user_id      bigint      NOT NULL REFERENCES users (id),
    key          text        NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
    request_hash bytea       NOT NULL,
    saga_id      bigint      NOT NULL REFERENCES sagas (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- Simulated payment gateway: one row per idempotency key, so a charge happens once.
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

-- Simulated merchant: one row per idempotency key, so an order is placed once.
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

-- +goose Down
DROP TABLE IF EXISTS sim_orders;
DROP TABLE IF EXISTS sim_charges;
DROP TABLE IF EXISTS idempotency_keys;
DROP TABLE IF EXISTS wallet_operations;
DROP TABLE IF EXISTS wallet_events;
DROP TABLE IF EXISTS ledger_entries;
DROP TABLE IF EXISTS wallets;
DROP TABLE IF EXISTS users;
