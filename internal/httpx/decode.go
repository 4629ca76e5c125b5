package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/walletsaga/walletsaga/internal/apperr"
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
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return decodeError(err)
	}
	if tok != json.Delim('{') {
		return apperr.New(apperr.Invalid, "request body must be a JSON object, got %s", jsonKind(tok))
	}
	known := jsonFieldNames(reflect.TypeOf(v))
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return decodeError(err)
		}
		key, _ := tok.(string)
		if known != nil && !known[key] {
			return apperr.New(apperr.Invalid, "unknown field %q", key)
		}
		if seen[key] {
			return apperr.New(apperr.Invalid, "field %q appears twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return decodeError(err)
		}
	}
	return nil
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	}
	return "array"
}

var fieldNames sync.Map // reflect.Type → map[string]bool

// jsonFieldNames returns the JSON names of the fields encoding/json would fill in *T for t
// = *T with T a struct, and nil for any other type.
func jsonFieldNames(t reflect.Type) map[string]bool {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	if names, ok := fieldNames.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	addFieldNames(t.Elem(), names)
	fieldNames.Store(t, names)
	return names
}

func addFieldNames(t reflect.Type, names map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFieldNames(ft, names) // an embedded struct's fields are the outer one's
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
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
