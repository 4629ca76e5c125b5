package senders

import (
	"context"
	"time"

	"github.com/walletsaga/walletsaga/internal/notify"
)

// ObservedSender passes every SMS to Inner and tells Observe how long the send took and
// whether it failed (metrics).
type ObservedSender struct {
	Inner   notify.Sender
	Observe func(took time.Duration, err error)
}

// Journaled reports whether Inner is journaled.
func (o ObservedSender) Journaled() bool { return notify.IsJournaled(o.Inner) }

// Send sends m through Inner, timing it.
func (o ObservedSender) Send(ctx context.Context, m notify.SMS) error {
	start := time.Now()
	err := o.Inner.Send(ctx, m)
	if o.Observe != nil {
		o.Observe(time.Since(start), err)
	}
	return err
}
