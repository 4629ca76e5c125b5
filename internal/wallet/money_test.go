package wallet_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/wallet"
)

func TestMoneyAddSubOverflow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b     wallet.Money
		add, sub wallet.Money
		addErr   bool
		subErr   bool
	}{
		{a: 100, b: 50, add: 150, sub: 50},
		{a: 0, b: 0},
		{a: -5, b: 7, add: 2, sub: -12},
		{a: math.MaxInt64, b: 1, addErr: true, sub: math.MaxInt64 - 1},
		{a: math.MaxInt64 - 1, b: 1, add: math.MaxInt64, sub: math.MaxInt64 - 2},
		{a: math.MinInt64, b: 1, add: math.MinInt64 + 1, subErr: true},
		{a: math.MinInt64, b: -1, addErr: true, sub: math.MinInt64 + 1},
		{a: math.MaxInt64, b: -1, add: math.MaxInt64 - 1, subErr: true},
		{a: 0, b: math.MinInt64, add: math.MinInt64, subErr: true},
		{a: -1, b: math.MinInt64, addErr: true, sub: math.MaxInt64},
	}
	for _, c := range cases {
		got, err := c.a.Add(c.b)
		if c.addErr {
			require.ErrorIs(t, err, wallet.ErrOverflow, "%d + %d", c.a, c.b)
		} else {
			require.NoError(t, err, "%d + %d", c.a, c.b)
			require.Equal(t, c.add, got, "%d + %d", c.a, c.b)
		}
		got, err = c.a.Sub(c.b)
		if c.subErr {
			require.ErrorIs(t, err, wallet.ErrOverflow, "%d - %d", c.a, c.b)
		} else {
			require.NoError(t, err, "%d - %d", c.a, c.b)
			require.Equal(t, c.sub, got, "%d - %d", c.a, c.b)
		}
	}
	_, err := wallet.Money(math.MinInt64).Neg()
	require.ErrorIs(t, err, wallet.ErrOverflow)
	n, err := wallet.Money(5).Neg()
	require.NoError(t, err)
	require.Equal(t, wallet.Money(-5), n)
}

func TestMoneyFormat(t *testing.T) {
	t.Parallel()
	require.Equal(t, "100.00", wallet.Money(10000).String())
	require.Equal(t, "0.05", wallet.Money(5).String())
	require.Equal(t, "-0.05", wallet.Money(-5).String())
	require.Equal(t, "1234.50", wallet.Money(123450).FormatIn("CNY"))
	require.Equal(t, "500", wallet.Money(500).FormatIn("JPY"))
	require.Equal(t, "1.500", wallet.Money(1500).FormatIn("KWD"))
	require.Equal(t, "-92233720368547758.08", wallet.Money(math.MinInt64).String())
	require.Equal(t, "100000000.00", wallet.MaxAmount.String())
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	ok := map[string]wallet.Money{"1": 1, "10000": 10000, "10000000000": wallet.MaxAmount, " 42 ": 42} //nolint:gocritic // mapKey: the spaces around 42 are the case under test
	for lit, want := range ok {
		got, err := wallet.ParseAmount("amount", lit)
		require.NoError(t, err, lit)
		require.Equal(t, want, got, lit)
	}
	bad := map[string]string{
		"":                     "amount is required",
		"null":                 "amount is required",
		`"100"`:                "not a string",
		"100.5":                "integer number of minor units",
		"100.0":                "integer number of minor units",
		"1e3":                  "without an exponent",
		"1E3":                  "without an exponent",
		"-5":                   "must be positive",
		"0":                    "positive integer",
		"10000000001":          "at most 10000000000",
		"99999999999999999999": "at most 10000000000",
		"true":                 "JSON integer",
		"{}":                   "JSON integer",
		"[1]":                  "JSON integer",
		"0x10":                 "JSON integer",
	}
	for lit, msg := range bad {
		_, err := wallet.ParseAmount("amount", lit)
		require.Error(t, err, lit)
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err), lit)
		require.Contains(t, err.Error(), msg, lit)
	}
}

func TestValidateCurrencyAndPhone(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"CNY", "USD", "JPY"} {
		require.NoError(t, wallet.ValidateCurrency(c))
	}
	for _, c := range []string{"", "cny", "CN", "CNYY", "C1Y"} {
		require.Error(t, wallet.ValidateCurrency(c), c)
	}
	for _, p := range []string{"+8613800138000", "+12025550123", "+44123456"} {
		require.NoError(t, wallet.ValidatePhone(p), p)
	}
	for _, p := range []string{"", "8613800138000", "+0123456789", "+1234567", "+1234567890123456", "+86 138", "+86-13800138000"} {
		require.Error(t, wallet.ValidatePhone(p), p)
	}
}
