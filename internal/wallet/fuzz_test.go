package wallet

// Fuzz targets of request validation: the amount parser and the checks of user creation,
// deposits, purchases and transfers. They need no database (validation runs before any
// query), so their seeds run in every `go test`; `go test -fuzz '^FuzzX$'` explores further.

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// requireInvalid fails t unless err is an *apperr.Error with code Invalid (a 400) and a
// message for the client.
func requireInvalid(t *testing.T, err error) {
	t.Helper()
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("rejection is not an *apperr.Error: %T %v", err, err)
	}
	if ae.Code != apperr.Invalid || apperr.Status(ae.Code) != http.StatusBadRequest {
		t.Fatalf("rejection has code %q (status %d), want invalid (400): %v", ae.Code, apperr.Status(ae.Code), err)
	}
	if ae.Message == "" {
		t.Fatalf("rejection without a message")
	}
}

// requireCleanText fails t unless an accepted free-text value is what people write and what
// the database and the logs can take as is: valid UTF-8 without U+FFFD, no control character
// and no code point Unicode has not assigned, no white space at either end, 1..maxLen
// characters. It is written apart from internal/freetext so that the two can disagree.
func requireCleanText(t *testing.T, field, v string, maxLen int) {
	t.Helper()
	if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
		t.Fatalf("accepted %s %q is not valid UTF-8", field, v)
	}
	for _, r := range v {
		assigned := unicode.IsGraphic(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Cf, unicode.Co)
		if r == 0 || unicode.IsControl(r) || !assigned {
			t.Fatalf("accepted %s %q holds U+%04X", field, v, r)
		}
	}
	if n := utf8.RuneCountInString(v); n < 1 || n > maxLen || strings.TrimSpace(v) != v {
		t.Fatalf("accepted %s %q: %d characters or surrounding spaces", field, v, n)
	}
}

// requireKey fails t unless an accepted Idempotency-Key is empty or 1–255 printable ASCII
// characters without spaces.
func requireKey(t *testing.T, k string) {
	t.Helper()
	if len(k) > 255 {
		t.Fatalf("accepted key of %d bytes", len(k))
	}
	for i := range len(k) {
		if k[i] <= ' ' || k[i] > '~' {
			t.Fatalf("accepted key %q holds byte %#x", k, k[i])
		}
	}
}

// requireAmount fails t unless an accepted amount is in (0, MaxAmount].
func requireAmount(t *testing.T, m Money) {
	t.Helper()
	if m <= 0 || m > MaxAmount {
		t.Fatalf("accepted amount %d outside (0, %d]", m, MaxAmount)
	}
}

// FuzzParseAmount: ParseAmount never panics; what it accepts is an integer in
// (0, MaxAmount] that round-trips through its decimal text and is the number the literal
// spells; what it refuses is an Invalid error.
func FuzzParseAmount(f *testing.F) {
	for _, lit := range []string{
		"1", "10000", "10000000000", "10000000001", " 42 ", "0", "-0", "-1", "+1", "01", "00000000000000000001",
		"1.5", "1.0", "0.0", "1e3", "1E3", "1e-3", `"100"`, `""`, "null", "", " ", "true", "false", "{}", "[1]", "0x10",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999999999999999",
		"NaN", "Infinity", "１", "٣", "1\x00", "\xff", "1_000",
	} {
		f.Add(lit)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		m, err := ParseAmount("amount", lit)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		requireAmount(t, m)
		back, err := ParseAmount("amount", strconv.FormatInt(int64(m), 10))
		if err != nil || back != m {
			t.Fatalf("%d does not round-trip: %d, %v", m, back, err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(lit), 10, 64)
		if err != nil || n != uint64(m) { //nolint:gosec // G115: requireAmount checked m > 0 above
			t.Fatalf("accepted %q as %d, which is not the number it spells (%d, %v)", lit, m, n, err)
		}
	})
}

// FuzzNewUser: user creation's validation never panics; an accepted user has a clean name,
// an E.164 phone of ASCII digits, a known locale; a refusal is an Invalid error.
func FuzzNewUser(f *testing.F) {
	for _, s := range [][3]string{
		{"Li Lei", "+8613800138000", ""},
		{"李雷 Łukasz 🙂", "+12025550123", "en"},
		{"Robert'); DROP TABLE users;--", "+8613800138000", "zh-CN"},
		{"a\x00b", "+8613800138000", "en"},
		{"a\xff\xfeb", "+8613800138000", "en"},
		{"a\ufffdb", "+8613800138000", "en"},
		{"a\u202eb", "+8613800138000", "en"},
		{"a\u200bb", "+8613800138000", "en"},
		{"山田\u3000太郎", "+8613800138000", "en"},
		{"José\u00a0María", "+8613800138000", "en"},
		{"👩\u200d👩\u200d👧 family", "+8613800138000", "en"},
		{"a\u0378b", "+8613800138000", "en"},
		{"\u3000padded", "+8613800138000", "en"},
		{"a\nb", "+8613800138000", "en"},
		{"\x1b[31mred", "+8613800138000", "en"},
		{" padded ", "+8613800138000", "en"},
		{strings.Repeat("🙂", 200), "+8613800138000", "en"},
		{strings.Repeat("🙂", 201), "+8613800138000", "en"},
		{"a", "+8613800138000\n", "en"},
		{"a", "+8613800138000\x00", "en"},
		{"a", "+８６１３８００１３８０００", "en"},
		{"a", "+٨٦١٣٨٠٠١٣٨٠٠٠", "en"},
		{"a", "+86138'; DROP TABLE users;--", "en"},
		{"a", "+0123456789", "en"},
		{"a", "+1234567890123456", "en"},
		{"a", "+8613800138000", "fr"},
		{"a", "+8613800138000", "en\x00"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, name, phone, locale string) {
		u, err := NewUser{Name: name, Phone: phone, Locale: locale}.normalize(DefaultCurrency)
		if err != nil {
			requireInvalid(t, err)
			return
		}
		requireCleanText(t, "name", u.Name, 200)
		if len(u.Phone) < 9 || len(u.Phone) > 16 || u.Phone[0] != '+' || u.Phone[1] == '0' ||
			strings.IndexFunc(u.Phone[1:], func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
			t.Fatalf("accepted phone %q", u.Phone)
		}
		if u.Locale != LocaleZhCN && u.Locale != LocaleEn {
			t.Fatalf("accepted locale %q", u.Locale)
		}
	})
}

// FuzzOperationRequest: the validation of deposits, purchases, transfers and withdrawals
// never panics; what it accepts has positive ids (two different ones for a transfer), an
// amount in (0, MaxAmount], clean texts and a well-formed Idempotency-Key; a refusal is an
// Invalid error. text1 is the deposit's source and the purchase's merchant, text2 the
// reference and the withdrawal's destination.
func FuzzOperationRequest(f *testing.F) {
	f.Add(int64(1), int64(2), int64(10000), "card", "order-1", "")
	f.Add(int64(1), int64(1), int64(1), "shop", "r", "key-1")
	f.Add(int64(0), int64(-1), int64(0), "", "", " ")
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), "m\x00", "r\xff", "k\x7f")
	f.Add(int64(7), int64(8), int64(MaxAmount), "Café «Zürich» 咖啡", "x'); DROP TABLE sagas;--", "Robert');DROP-TABLE--")
	f.Add(int64(7), int64(8), int64(MaxAmount+1), "m", "\u202egnp.exe", strings.Repeat("k", 256))
	f.Add(int64(7), int64(8), int64(-5), strings.Repeat("m", 101), "\xed\xa0\x80", "ключ") // U+D800 as raw bytes: not UTF-8
	// User ids as the clock mints them (migrations/wallet/00028_user_ids.sql): one of late
	// 2026 beside a user from before them, and the largest, 2^53 - 1, beside 2^53.
	f.Add(int64(119709696000007), int64(3), int64(100), "card", "order-2", "key-2")
	f.Add(int64(1<<53-1), int64(1<<53), int64(1), "shop", "r", "")
	f.Fuzz(func(t *testing.T, user, other, amount int64, text1, text2, key string) {
		accepted := func(ids []int64, m Money, k string) {
			t.Helper()
			for _, id := range ids {
				if id <= 0 {
					t.Fatalf("accepted id %d", id)
				}
			}
			requireAmount(t, m)
			requireKey(t, k)
		}

		if d, err := (DepositRequest{UserID: user, Amount: Money(amount), Source: text1, IdempotencyKey: key}).normalize(); err != nil {
			requireInvalid(t, err)
		} else {
			accepted([]int64{d.UserID}, d.Amount, d.IdempotencyKey)
			requireCleanText(t, "source", d.Source, 64)
		}

		if p, err := (PurchaseRequest{UserID: user, Amount: Money(amount), Merchant: text1, Reference: text2, IdempotencyKey: key}).normalize(); err != nil {
			requireInvalid(t, err)
		} else {
			accepted([]int64{p.UserID}, p.Amount, p.IdempotencyKey)
			requireCleanText(t, "merchant", p.Merchant, 100)
			requireCleanText(t, "reference", p.Reference, 100)
		}

		if w, err := (WithdrawalRequest{UserID: user, Amount: Money(amount), Destination: text2, IdempotencyKey: key}).normalize(); err != nil {
			requireInvalid(t, err)
		} else {
			accepted([]int64{w.UserID}, w.Amount, w.IdempotencyKey)
			requireCleanText(t, "destination", w.Destination, 100)
		}

		if tr, err := (TransferRequest{From: user, To: other, Amount: Money(amount), IdempotencyKey: key}).normalize(); err != nil {
			requireInvalid(t, err)
		} else {
			accepted([]int64{tr.From, tr.To}, tr.Amount, tr.IdempotencyKey)
			if tr.From == tr.To {
				t.Fatalf("accepted a transfer from %d to itself", tr.From)
			}
		}
	})
}

// TestTextValidation pins what FuzzNewUser and FuzzOperationRequest explore: the text a
// person writes is accepted verbatim, whatever its script or symbols (the ideographic space,
// NBSP, emoji joined by ZWJ, format characters), however SQL-looking; text that is not valid
// UTF-8, holds control characters or unassigned code points, or starts or ends with white
// space is refused with a message that says why. Operator actions follow the same rules.
func TestTextValidation(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"李雷 Łukasz 🙂", "Robert'); DROP TABLE users;--", "O'Brien", `"quoted" <b>bold</b>`, strings.Repeat("字", 200),
		"山田\u3000太郎", "José\u00a0María", "👨\u200d👩\u200d👧\u200d👦", "❤\ufe0f", "a\u200bb", "a\u202eb", "\ue000",
	} {
		u, err := NewUser{Name: ok, Phone: "+8613800138000"}.normalize(DefaultCurrency)
		if err != nil || u.Name != ok {
			t.Errorf("name %q: got %q, %v", ok, u.Name, err)
		}
	}
	bad := map[string]string{
		"a\x00b":                     "must not contain control characters or unassigned code points, got U+0000",
		"a\nb":                       "got U+000A",
		"a\u0085b":                   "got U+0085 (a control character)",
		"a\u0378b":                   "got U+0378 (unassigned)",
		"a\xff\xfeb":                 "must be valid UTF-8",
		"a\ufffdb":                   "must be valid UTF-8",
		" a":                         "must not start or end with spaces",
		"a\u3000":                    "must not start or end with spaces",
		strings.Repeat("字", 201):     "at most 200 characters, got 201",
		"":                           "name is required",
		"x'); DROP TABLE users;\x00": "got U+0000",
	}
	for name, msg := range bad {
		_, err := NewUser{Name: name, Phone: "+8613800138000"}.normalize(DefaultCurrency)
		requireInvalid(t, err)
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("name %q: %v, want %q", name, err, msg)
		}
	}
	for _, a := range []OperatorAction{
		{Actor: "alice", Reason: "refund\x00 API is back"},
		{Actor: "alice", Reason: "line one\nline two"},
		{Actor: "alice", Reason: "\xff"},
		{Actor: "alice", Reason: strings.Repeat("r", MaxReasonLen+1)},
		{Actor: "al\x00ice", Reason: "ok"},
		{Actor: "alice"},
		{Reason: "ok"},
	} {
		requireInvalid(t, a.check())
	}
	if err := (OperatorAction{Actor: "bob@ops", Reason: "refunded by hand, ticket OPS-7 — 已退款"}).check(); err != nil {
		t.Errorf("a plain reason: %v", err)
	}
}
