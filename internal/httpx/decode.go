package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
)

func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return apperr.New(apperr.Invalid, "request body must hold a single JSON object")
	}
	return nil
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
