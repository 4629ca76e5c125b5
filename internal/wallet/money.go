package wallet

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// Money is an amount in minor units of a currency (fen for CNY, cents for USD). It is never
// a float; Add and Sub report overflow instead of wrapping.
type Money int64

// MaxAmount is the largest amount one operation (a deposit, a purchase, …) may move:
// 100,000,000.00 in a 2-decimal currency. Balances may grow beyond it, up to math.MaxInt64,
// and every change is checked against that bound.
const MaxAmount Money = 10_000_000_000

// MaxBalance is the largest balance a wallet can hold: the largest int64.
const MaxBalance Money = math.MaxInt64

// DefaultCurrency is the currency of a wallet created without one.
const DefaultCurrency = "CNY"

// ErrOverflow means an arithmetic result would not fit in an int64.
var ErrOverflow = errors.New("wallet: amount overflows int64")

// Add returns m+o, or ErrOverflow.
func (m Money) Add(o Money) (Money, error) {
	if (o > 0 && m > math.MaxInt64-o) || (o < 0 && m < math.MinInt64-o) {
		return 0, ErrOverflow
	}
	return m + o, nil
}

// Sub returns m-o, or ErrOverflow.
func (m Money) Sub(o Money) (Money, error) {
	if (o > 0 && m < math.MinInt64+o) || (o < 0 && m > math.MaxInt64+o) {
		return 0, ErrOverflow
	}
	return m - o, nil
}

// Neg returns -m, or ErrOverflow for math.MinInt64.
func (m Money) Neg() (Money, error) {
	if m == math.MinInt64 {
		return 0, ErrOverflow
	}
	return -m, nil
}

// String formats m with two decimals ("100.00", "-0.05"), the exponent of most currencies.
func (m Money) String() string { return m.Format(2) }

// Format formats m with the given number of decimals (0–4), e.g. Format(2) = "1234.50".
func (m Money) Format(decimals int) string {
	if decimals <= 0 || decimals > 4 {
		return strconv.FormatInt(int64(m), 10)
	}
	neg := m < 0
	// Work on the magnitude as uint64 so that math.MinInt64 formats correctly.
	u := uint64(m) //nolint:gosec // G115: two's complement on purpose, negated below
	if neg {
		u = -u
	}
	div := uint64(1)
	for range decimals {
		div *= 10
	}
	s := fmt.Sprintf("%d.%0*d", u/div, decimals, u%div)
	if neg {
		return "-" + s
	}
	return s
}

// CurrencyDecimals returns the number of minor-unit digits of an ISO 4217 currency: 0 for
// JPY and KRW, 3 for BHD, KWD, JOD and OMR, 2 otherwise.
func CurrencyDecimals(currency string) int {
	switch currency {
	case "JPY", "KRW":
		return 0
	case "BHD", "KWD", "JOD", "OMR":
		return 3
	}
	return 2
}

// FormatIn formats m in the minor units of currency ("100.00" for CNY, "100" for JPY).
func (m Money) FormatIn(currency string) string { return m.Format(CurrencyDecimals(currency)) }

// ValidateCurrency checks that c looks like an ISO 4217 code: three upper-case ASCII letters.
func ValidateCurrency(c string) error {
	if len(c) != 3 {
		return apperr.New(apperr.Invalid, "currency must be 3 upper-case letters (ISO 4217), got %q", c)
	}
	for i := range len(c) {
		if c[i] < 'A' || c[i] > 'Z' {
			return apperr.New(apperr.Invalid, "currency must be 3 upper-case letters (ISO 4217), got %q", c)
		}
	}
	return nil
}

// ValidateAmount checks that an operation's amount is positive and at most MaxAmount.
func ValidateAmount(field string, m Money) error {
	switch {
	case m <= 0:
		return apperr.New(apperr.Invalid, "%s must be a positive integer number of minor units, got %d", field, int64(m))
	case m > MaxAmount:
		return apperr.New(apperr.Invalid, "%s must be at most %d minor units (%s), got %d", field, int64(MaxAmount), MaxAmount, int64(m))
	}
	return nil
}

// ParseAmount parses the literal text of a JSON number as an operation amount in minor units:
// an integer (no fraction, no exponent), positive and at most MaxAmount. field names the
// field in error messages. Errors are *apperr.Error with code Invalid.
func ParseAmount(field, literal string) (Money, error) {
	lit := strings.TrimSpace(literal)
	switch {
	case lit == "" || lit == "null":
		return 0, apperr.New(apperr.Invalid, "%s is required", field)
	case strings.HasPrefix(lit, `"`):
		return 0, apperr.New(apperr.Invalid, "%s must be a JSON integer in minor units, not a string", field)
	case lit == "true" || lit == "false" || strings.HasPrefix(lit, "{") || strings.HasPrefix(lit, "["):
		return 0, apperr.New(apperr.Invalid, "%s must be a JSON integer in minor units", field)
	case strings.ContainsAny(lit, "eE"):
		return 0, apperr.New(apperr.Invalid, "%s must be an integer in minor units without an exponent, got %s", field, lit)
	case strings.Contains(lit, "."):
		return 0, apperr.New(apperr.Invalid, "%s must be an integer number of minor units (e.g. 10000 for 100.00), got %s", field, lit)
	case strings.HasPrefix(lit, "-"):
		return 0, apperr.New(apperr.Invalid, "%s must be positive, got %s", field, lit)
	}
	for i := range len(lit) {
		if lit[i] < '0' || lit[i] > '9' {
			return 0, apperr.New(apperr.Invalid, "%s must be a JSON integer in minor units, got %s", field, lit)
		}
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		// Only a range error is possible here: the literal is all digits.
		return 0, apperr.New(apperr.Invalid, "%s must be at most %d minor units (%s), got %s", field, int64(MaxAmount), MaxAmount, lit)
	}
	m := Money(n)
	if err := ValidateAmount(field, m); err != nil {
		return 0, err
	}
	return m, nil
}
