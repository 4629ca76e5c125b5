//go:build !go1.27

package walletevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"unicode/utf8"

	"github.com/walletsaga/walletsaga/internal/jsonkeys"
)

// Decode, before go1.27 (GOTOOLCHAIN=local on an older Go; the Makefile and CI build with
// go1.27.3, whose decode.go is the one tested): encoding/json's first version, held to the
// same rules by a second pass over the keys (jsonkeys), which it would let through. See
// decode.go for the rules.
func Decode(body []byte) (Event, error) {
	if !utf8.Valid(body) {
		return Event{}, errors.New("walletevent: body is not valid UTF-8")
	}
	// The keys first, so that an unknown or repeated one is named as decode.go names it.
	if err := checkKeys(body); err != nil {
		return Event{}, err
	}
	var e Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("walletevent: decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, errors.New("walletevent: trailing data after the event")
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// fieldNames are the JSON keys of Event.
var fieldNames = jsonkeys.FieldNames(reflect.TypeFor[Event]())

// checkKeys requires body to be a JSON object whose keys are field names, spelled exactly,
// each at most once.
func checkKeys(body []byte) error {
	if err := jsonkeys.Check(body, fieldNames); err != nil {
		return fmt.Errorf("walletevent: %w", err)
	}
	return nil
}
