package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/httpx"
)

// pathID parses the :id path parameter: a positive int64, else 400.
func pathID(c echo.Context, what string) (int64, error) {
	raw := c.Param("id")
	id, ok := httpx.Digits(raw)
	if !ok || id <= 0 {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive 64-bit integer, got %q", what, raw)
	}
	return id, nil
}

// pathUser parses the :id path parameter of a user's route and authorizes who to act for
// that user.
func pathUser(c echo.Context, who caller) (int64, error) {
	id, err := pathID(c, "user id")
	if err != nil {
		return 0, err
	}
	if err := authorize(who, access{kind: mayActFor, user: id}); err != nil {
		return 0, err
	}
	return id, nil
}

// queryInt parses an optional integer query parameter (absent: 0) that must be >= least;
// given empty, it is refused rather than taken as absent.
func queryInt(c echo.Context, name string, least int64) (int64, error) {
	if !c.QueryParams().Has(name) {
		return 0, nil
	}
	raw := c.QueryParam(name)
	n, ok := httpx.Digits(raw)
	if !ok || n < least {
		return 0, apperr.New(apperr.Invalid, "query parameter %s must be an integer >= %d, got %q", name, least, raw)
	}
	return n, nil
}

// bodyID parses a user id given in a JSON body: a positive integer.
func bodyID(field string, raw json.RawMessage) (int64, error) {
	lit := strings.TrimSpace(string(raw))
	if lit == "" || lit == "null" {
		return 0, apperr.New(apperr.Invalid, "%s is required", field)
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || n <= 0 || strings.HasPrefix(lit, "+") {
		return 0, apperr.New(apperr.Invalid, "%s must be a positive integer user id, got %s", field, freetext.Clip(lit, 40))
	}
	return n, nil
}

// optional returns an optional text field's value: "" when absent (the default applies);
// given, it must be a non-empty string.
func optional(field string, raw json.RawMessage) (string, error) {
	if raw == nil {
		return "", nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", apperr.New(apperr.Invalid, "%s must be a string (leave it out for the default), got %s", field, freetext.Clip(string(raw), 40))
	}
	if v == "" {
		return "", apperr.New(apperr.Invalid, "%s must not be empty: leave it out for the default", field)
	}
	return v, nil
}
