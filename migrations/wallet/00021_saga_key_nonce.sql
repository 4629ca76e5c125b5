-- +goose Up
-- Idempotency keys that are a saga's own (docs/ARCHITECTURE.md, "Idempotency keys at the
-- remote parties"): key_nonce is 128 random bits the engine mints when it starts a saga and
-- writes in the commit that creates it; every key the saga's remote steps send starts with
-- "<id>-<nonce in hex>", so that another deployment's saga with the same id, or this one's
-- after a restore from a backup, never sends a key the gateway or the merchant has seen.
--
-- The sagas already here keep NULL, which the engine reads as the key prefix "<id>": the
-- keys they were sending. A saga in flight asks again about its charge, order or payout, or
-- undoes it, under the key it was made with (a new key would charge a second time, or undo
-- nothing). No default: NULL only ever means a saga from before this migration. Adding a
-- nullable column without a default rewrites nothing.
ALTER TABLE sagas ADD COLUMN key_nonce uuid;

-- +goose Down
-- Refused while a saga with a nonce may still call a remote party (running, compensating,
-- or waiting for an operator's retry): without its nonce it would send keys in the old
-- format, under which its charge, order or payout is unknown, and make it a second time.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sagas WHERE key_nonce IS NOT NULL
               AND state IN ('running', 'compensating', 'needs_attention')) THEN
        RAISE EXCEPTION 'sagas with a key nonce are still in flight: let them end before going below 00021';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE sagas DROP COLUMN key_nonce;
