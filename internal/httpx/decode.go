package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/jsonkeys"
)

// decodeStrict decodes one JSON object into v. Beyond encoding/json with unknown fields
// disallowed, it refuses what that package lets through silently: a body that is not UTF-8
// (it would replace the bad bytes with U+FFFD), a null instead of an object (it would leave v
// as it is), a top-level key that only matches a field when case is ignored ("NAME" for
// "name") and a key given twice (it would keep the last one; another parser in the path may
// keep the first). Keys are checked at the top level, where request bodies keep their fields.
func decodeStrict(r io.Reader, v any) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return decodeError(err)
	}
	if !utf8.Valid(body) {
		return apperr.New(apperr.Invalid, "request body must be UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.New(apperr.Invalid, "request body must hold a single JSON object")
	}
	return checkKeys(body, v)
}

// checkKeys requires body (one valid JSON value) to be an object whose keys each appear once
// and, when v points to a struct, are the JSON names of its fields, spelled exactly.
func checkKeys(body []byte, v any) error {
	err := jsonkeys.Check(body, jsonkeys.FieldNames(reflect.TypeOf(v)))
	var ke *jsonkeys.Error
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ke):
		return decodeError(err)
	case ke.Problem == jsonkeys.NotObject:
		return apperr.New(apperr.Invalid, "request body must be a JSON object, got %s", ke.Kind)
	}
	return apperr.New(apperr.Invalid, "%s", ke.Error())
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var maxErr *http.MaxBytesError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		return fromEchoError(he)
	case errors.Is(err, io.EOF):
		return apperr.New(apperr.Invalid, "request body is empty")
	case errors.As(err, &maxErr):
		return apperr.New(apperr.TooLarge, "request body too large")
	case errors.As(err, &syn):
		return apperr.New(apperr.Invalid, "invalid JSON at byte %d", syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apperr.New(apperr.Invalid, "invalid JSON: unexpected end of body")
	case errors.As(err, &typ):
		if typ.Field != "" {
			return apperr.New(apperr.Invalid, "field %q must be %s, got %s", typ.Field, typ.Type, typ.Value)
		}
		return apperr.New(apperr.Invalid, "request body must be a JSON object, got %s", typ.Value)
	case bytes.HasPrefix([]byte(err.Error()), []byte("json: unknown field ")):
		return apperr.New(apperr.Invalid, "unknown field %s", bytes.TrimPrefix([]byte(err.Error()), []byte("json: unknown field ")))
	default:
		return apperr.Wrap(err, apperr.Invalid, "invalid request body: %s", fmt.Sprint(err))
	}
}
