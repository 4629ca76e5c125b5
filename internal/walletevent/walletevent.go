// Package walletevent is the wire format of a balance change, as the wallet's outbox relay
// publishes it to RocketMQ and the notifier consumes it: versioned JSON, one message per
// event, sharding key = user id, tag = kind, keys = event id and "user:seq".
package walletevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Version is the body version this code writes and reads.
const Version = 1

// Kind is what changed the balance.
type Kind string

// The kinds of balance change.
const (
	Deposit     Kind = "deposit"      // a top-up credited
	Purchase    Kind = "purchase"     // a purchase debited
	Refund      Kind = "refund"       // a purchase refunded (compensation)
	TransferOut Kind = "transfer_out" // sent to another user
	TransferIn  Kind = "transfer_in"  // received from another user
	Reversal    Kind = "reversal"     // a transfer debit credited back (compensation)
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	switch k {
	case Deposit, Purchase, Refund, TransferOut, TransferIn, Reversal:
		return true
	}
	return false
}

// Event is one balance change of one user. Amount is signed (negative for debits), in minor
// units of Currency; BalanceAfter is the balance once it applied.
type Event struct {
	V            int       `json:"v"`
	EventID      int64     `json:"event_id"`
	UserID       int64     `json:"user_id"`
	Seq          int64     `json:"seq"`
	Kind         Kind      `json:"kind"`
	Amount       int64     `json:"amount"`
	Currency     string    `json:"currency"`
	BalanceAfter int64     `json:"balance_after"`
	SagaID       int64     `json:"saga_id"`
	Phone        string    `json:"phone"`
	Locale       string    `json:"locale"`
	OccurredAt   time.Time `json:"occurred_at"`
}

// ShardingKey is the key that keeps one user's events on one queue, in order.
func (e Event) ShardingKey() string { return strconv.FormatInt(e.UserID, 10) }

// SeqKey is "user:seq", the message key mqadmin can find and the SMS idempotency key.
func (e Event) SeqKey() string { return fmt.Sprintf("%d:%d", e.UserID, e.Seq) }

// Validate checks the fields a consumer relies on.
func (e Event) Validate() error {
	switch {
	case e.V != Version:
		return fmt.Errorf("walletevent: unsupported version %d", e.V)
	case e.UserID <= 0:
		return errors.New("walletevent: user_id must be positive")
	case e.Seq <= 0:
		return errors.New("walletevent: seq must be positive")
	case !e.Kind.Valid():
		return fmt.Errorf("walletevent: unknown kind %q", e.Kind)
	case len(e.Currency) != 3:
		return fmt.Errorf("walletevent: bad currency %q", e.Currency)
	case e.BalanceAfter < 0:
		return errors.New("walletevent: negative balance_after")
	}
	return nil
}

// Encode returns the message body of e (setting the version).
func Encode(e Event) ([]byte, error) {
	e.V = Version
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}

// Decode parses and validates a message body. Unknown fields are rejected so that a producer
// and consumer out of step fail loudly instead of dropping data.
func Decode(body []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("walletevent: decode: %w", err)
	}
	if dec.More() {
		return Event{}, errors.New("walletevent: trailing data after the event")
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}
