// Package wallet is where money moves: users and their wallets, the ledger, the transactional
// outbox of balance events (one gap-free sequence per user), and the sagas that move money
// (one file per kind, named after it, each listed in sagas.go's registry) run by
// internal/saga against a payment gateway and merchants.
//
// The domain knows no HTTP framework; internal/wallet/httpapi adapts it to echo. Errors meant
// for clients are *apperr.Error; anything else is internal.
package wallet

import (
	"errors"
	"regexp"
	"time"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/saga"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// The locales a user may choose for SMS.
const (
	LocaleZhCN = "zh-CN"
	LocaleEn   = "en"
)

// ErrInsufficientFunds means a debit would take a balance below zero.
var ErrInsufficientFunds = errors.New("wallet: insufficient funds")

// ErrBalanceOverflow means a credit would take a balance beyond what an int64 holds.
var ErrBalanceOverflow = errors.New("wallet: balance would overflow")

// User is an account holder.
type User struct {
	ID        int64
	Name      string
	Phone     string // E.164
	Locale    string // zh-CN or en
	CreatedAt time.Time
}

// Wallet is a user's balance. LastSeq is the seq of the user's latest balance event.
type Wallet struct {
	UserID   int64
	Balance  Money
	Currency string
	LastSeq  int64
}

// NewUser is what CreateUser needs.
type NewUser struct {
	Name     string
	Phone    string
	Locale   string // "" means zh-CN
	Currency string // "" means the service's default currency
}

// Event is a stored balance event, as the events API lists it.
type Event struct {
	ID           int64
	UserID       int64
	Seq          int64
	Kind         walletevent.Kind
	Amount       Money // signed: negative for debits
	Currency     string
	BalanceAfter Money
	SagaID       int64
	OccurredAt   time.Time
	Published    bool
}

// Operation is a saga as the wallet sees it: the engine's state and steps, plus who moved
// how much to whom.
type Operation struct {
	ID             int64
	Kind           string
	State          saga.State
	UserID         int64
	CounterpartyID int64 // transfers: the payee; 0 otherwise
	Amount         Money
	Currency       string
	Merchant       string
	Reference      string
	Source         string
	Destination    string // withdrawals: the bank account
	// ProviderKeyPrefix starts the idempotency keys of the saga's calls to the gateway or
	// the merchant (saga.Snapshot.KeyPrefix): "<prefix>:<step>", an undo's + ":compensate".
	ProviderKeyPrefix string
	Steps             []saga.StepRecord
	Error             *saga.ErrorInfo
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// Replayed is true when an Idempotency-Key matched an earlier request and this is its saga.
	Replayed bool
}

// SagaFilter selects sagas for ListSagas.
type SagaFilter struct {
	UserID int64      // 0: any user; otherwise sagas where the user pays or receives
	State  saga.State // "": any state
	Limit  int        // 1–100; 0 means 20
	Cursor int64      // only sagas with an id below this (the previous page's NextCursor)
}

// SagaPage is one page of ListSagas, newest first. It may hold fewer than the filter's Limit
// sagas, even none, while NextCursor is set: the call read its ListScanBudget of rows before
// the page was full.
type SagaPage struct {
	Items []Operation // without Steps
	// NextCursor is the Cursor of the next page: 0 only when there is no further page.
	NextCursor int64
}

// DefaultEventPage is how many events ListEvents returns when the filter sets no limit.
const DefaultEventPage = 100

// EventFilter selects events for ListEvents.
type EventFilter struct {
	AfterSeq int64 // only events with a larger seq
	Limit    int   // 1–1000; 0 means DefaultEventPage
}

var phoneRE = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// ValidatePhone checks an E.164 number: "+", then 8 to 15 digits, the first not 0.
func ValidatePhone(p string) error {
	if !phoneRE.MatchString(p) {
		// The value is not echoed: error messages reach the access log, and phones stay out of logs.
		return apperr.New(apperr.Invalid, "phone must be an E.164 number: + then 8 to 15 digits, e.g. +8613800138000; got %d characters", len(p))
	}
	return nil
}

// ValidateLocale checks a locale (zh-CN or en).
func ValidateLocale(l string) error {
	if l != LocaleZhCN && l != LocaleEn {
		return apperr.New(apperr.Invalid, "locale must be %q or %q, got %q", LocaleZhCN, LocaleEn, l)
	}
	return nil
}

// ValidateID checks that an id given by a client is positive.
func ValidateID(field string, id int64) error {
	if id <= 0 {
		return apperr.New(apperr.Invalid, "%s must be a positive integer, got %d", field, id)
	}
	return nil
}

// validateText checks a free-text field, which every caller requires (an optional one has
// its default by then), by the one rule of internal/freetext: 1..maxLen characters, no
// control or unassigned characters, valid UTF-8, no white space at either end.
func validateText(field, v string, maxLen int) error {
	return freetext.Check(field, v, true, maxLen)
}

// validateKey checks an optional Idempotency-Key: "" (none), or ValidateIdempotencyKey's.
func validateKey(k string) error {
	if k == "" {
		return nil
	}
	return ValidateIdempotencyKey(k)
}

// ValidateIdempotencyKey checks an Idempotency-Key: 1 to 255 printable ASCII characters.
func ValidateIdempotencyKey(k string) error {
	if len(k) == 0 || len(k) > 255 {
		return apperr.New(apperr.Invalid, "Idempotency-Key must be 1 to 255 characters, got %d", len(k))
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return apperr.New(apperr.Invalid, "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return nil
}

func (u NewUser) normalize(defaultCurrency string) (NewUser, error) {
	if u.Locale == "" {
		u.Locale = LocaleZhCN
	}
	if u.Currency == "" {
		u.Currency = defaultCurrency
	}
	if err := validateText("name", u.Name, 200); err != nil {
		return u, err
	}
	if err := ValidatePhone(u.Phone); err != nil {
		return u, err
	}
	if err := ValidateLocale(u.Locale); err != nil {
		return u, err
	}
	if err := ValidateCurrency(u.Currency); err != nil {
		return u, err
	}
	return u, nil
}
