package httpx

import (
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

// Digits parses s as a non-negative decimal integer written with ASCII digits only: no sign,
// no spaces, no base prefix (strconv alone takes "+5"), and small enough for an int64.
func Digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// StrictQuery refuses a query string that does not parse. net/url drops a malformed pair (a
// bad %-escape, a ';' as separator) without a word, so "?user_id=7;x" would list every
// user's sagas and "?cursor=1;x" restart from the first page: a filter the client sent must
// be applied or refused, never ignored. New installs it for every route.
func StrictQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, err := url.ParseQuery(c.Request().URL.RawQuery); err != nil {
			return apperr.New(apperr.Invalid, "the query string is malformed (%v): separate parameters with & and percent-encode their values", err)
		}
		return next(c)
	}
}
