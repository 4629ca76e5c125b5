-- +goose Up
-- Trace context (docs/ARCHITECTURE.md, "Observability: traces"): the W3C traceparent of the
-- span that started a saga (recovery runs link to it) and of the commit that wrote an outbox
-- row (the relay's send span is its child, and the message carries the send span's). NULL
-- when tracing is off. Adding a nullable column without a default rewrites nothing.
ALTER TABLE sagas ADD COLUMN traceparent text;
ALTER TABLE wallet_events ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE wallet_events DROP COLUMN traceparent;
ALTER TABLE sagas DROP COLUMN traceparent;
