package main

import (
	"context"

	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/ordering"
)

// The notifier's parts take their own message type; what the RocketMQ adapter delivers is
// converted here, so that no part of internal/notify depends on the adapter.

// message is d as the notifier takes it.
func message(d ordering.Delivery) inbox.Message {
	return inbox.Message{
		MsgID: d.MsgID, Topic: d.Topic, Queue: d.QueueLabel(), Offset: d.QueueOffset, ShardingKey: d.ShardingKey, Body: d.Body,
		DeadLetterReason: d.Properties[ordering.PropertyDeadLetterReason], Traceparent: d.Properties[ordering.PropertyTraceparent],
		MayBaseline: d.FirstAtEnd,
	}
}

// consume hands each batch the orderly consumer delivers to handle.
func consume(handle func(context.Context, []inbox.Message) error) ordering.Handler {
	return func(ctx context.Context, batch []ordering.Delivery) error {
		msgs := make([]inbox.Message, len(batch))
		for i, d := range batch {
			msgs[i] = message(d)
		}
		return handle(ctx, msgs)
	}
}

// reconcile hands each message the DLQ watcher reads to handle.
func reconcile(handle func(context.Context, inbox.Message) error) func(context.Context, ordering.Delivery) error {
	return func(ctx context.Context, d ordering.Delivery) error { return handle(ctx, message(d)) }
}
