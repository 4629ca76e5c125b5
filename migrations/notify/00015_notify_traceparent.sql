-- +goose Up
-- Trace context (docs/ARCHITECTURE.md, "Observability: traces"): the W3C traceparent of the
-- inbox span that recorded a notification, a child of the relay's send span the message
-- carried; the lane's send span is its child. NULL when tracing is off or the message
-- carried none. Adding a nullable column without a default rewrites nothing.
ALTER TABLE notify.notifications ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE notify.notifications DROP COLUMN traceparent;
