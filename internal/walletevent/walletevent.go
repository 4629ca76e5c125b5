// Package walletevent is the wire format of a balance change, as the wallet's outbox relay
// publishes it to RocketMQ and the notifier consumes it: versioned JSON, one message per
// event, sharding key = user id, tag = kind, keys = event id and "user:seq". asyncapi.yaml,
// beside this file, is the topic's contract for every producer and consumer: the body's JSON
// Schema, the message properties, order and delivery; the tests hold Encode and Decode to it.
package walletevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Version is the body version this code writes. It reads it and the one before (1), whose
// bodies have no epoch: they decode with Epoch and EpochSince 0, "not said", which the
// notifier reads as the user's current epoch (a producer of the previous release, during an
// upgrade).
const Version = 2

// MaxEpoch is the largest epoch: 2^53−1, so that JSON readers that hold numbers as doubles
// (JavaScript) read it exactly.
const MaxEpoch = 1<<53 - 1

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

	Withdrawal       Kind = "withdrawal"        // paid out to the user's bank account
	WithdrawalRefund Kind = "withdrawal_refund" // a withdrawal debit given back (compensation)
)

// kinds is every kind, in the order the documents list them. It is the one list of them:
// everything else that lists kinds is checked against it by a test (the database's CHECK
// constraint on wallet_events.kind, the wallet's and the notifier's OpenAPI documents, the
// notifier's SMS templates in every locale, the sagas that emit them).
var kinds = []Kind{Deposit, Purchase, Refund, TransferOut, TransferIn, Reversal, Withdrawal, WithdrawalRefund}

// Kinds returns every kind of balance change, in the order the documents list them.
func Kinds() []Kind { return slices.Clone(kinds) }

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(kinds, k) }

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
	// Epoch names the unbroken history of the wallet's database the event was written in:
	// a new one begins when that history rewinds (a restore, a point-in-time recovery, a
	// copy, a failover that lost commits), and a later epoch is a larger number. (Epoch,
	// UserID, Seq) never repeats, where (UserID, Seq) alone may after a rewind.
	Epoch int64 `json:"epoch,omitzero"`
	// EpochSince is the user's first seq in Epoch: the seqs before it are the user's history
	// from earlier epochs, those from it on belong to this one.
	EpochSince int64 `json:"epoch_since,omitzero"`
}

// ShardingKey is the key that keeps one user's events on one queue, in order.
func (e Event) ShardingKey() string { return strconv.FormatInt(e.UserID, 10) }

// SeqKey is "user:seq", the message key mqadmin can find.
func (e Event) SeqKey() string { return fmt.Sprintf("%d:%d", e.UserID, e.Seq) }

// Validate checks the fields a consumer relies on, in the shapes the wallet writes them:
// currency an ISO 4217 code (three upper-case ASCII letters), phone an E.164 number (as the
// users table's check), locale a language tag of ASCII letters, digits, '-' and '_' (or
// empty). So every string of a valid event is printable ASCII, which the notifier can store
// as it is (Postgres refuses NUL, invalid UTF-8 and lone surrogates in text and jsonb) and
// put in an SMS.
func (e Event) Validate() error {
	switch {
	case e.V != Version && e.V != 1:
		return fmt.Errorf("walletevent: unsupported version %d", e.V)
	case e.V == 1 && (e.Epoch != 0 || e.EpochSince != 0):
		return errors.New("walletevent: a version 1 body has no epoch")
	case e.V == Version && (e.Epoch <= 0 || e.Epoch > MaxEpoch):
		return fmt.Errorf("walletevent: epoch must be 1 to %d, got %d", int64(MaxEpoch), e.Epoch)
	case e.V == Version && (e.EpochSince <= 0 || e.EpochSince > e.Seq):
		return fmt.Errorf("walletevent: epoch_since must be 1 to seq (%d), got %d", e.Seq, e.EpochSince)
	case e.UserID <= 0:
		return errors.New("walletevent: user_id must be positive")
	case e.Seq <= 0:
		return errors.New("walletevent: seq must be positive")
	case !e.Kind.Valid():
		return fmt.Errorf("walletevent: unknown kind %q", e.Kind)
	case !validCurrency(e.Currency):
		return fmt.Errorf("walletevent: bad currency %q (want 3 upper-case letters)", e.Currency)
	case e.BalanceAfter < 0:
		return errors.New("walletevent: negative balance_after")
	case !validPhone(e.Phone):
		// Not the number itself: this message is logged, and phone numbers are masked in logs.
		return fmt.Errorf("walletevent: phone is not an E.164 number (+ and 8 to 15 digits; got %d bytes)", len(e.Phone))
	case !validLocale(e.Locale):
		return fmt.Errorf("walletevent: bad locale %q", e.Locale)
	}
	return nil
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range len(c) {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// validPhone matches the users table's check: ^\+[1-9][0-9]{7,14}$.
func validPhone(p string) bool {
	if len(p) < 9 || len(p) > 16 || p[0] != '+' || p[1] == '0' {
		return false
	}
	for i := 1; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// validLocale accepts what a BCP 47 tag is made of ("zh-CN", "en", "zh_Hans"), at most 35
// characters; Render falls back to English for a locale it does not write.
func validLocale(l string) bool {
	if len(l) > 35 {
		return false
	}
	for i := range len(l) {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Encode returns the message body of e (setting the version: 1 for an event without an epoch).
func Encode(e Event) ([]byte, error) {
	e.V = Version
	if e.Epoch == 0 {
		// An outbox row written before the wallet had epochs: the body of the version before.
		e.V, e.EpochSince = 1, 0
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}
