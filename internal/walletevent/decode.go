//go:build go1.27

package walletevent

import (
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Decode parses and validates a message body: exactly one JSON object, in UTF-8, whose keys
// are Event's field names, spelled exactly, each at most once. Unknown fields are rejected so
// that a producer and consumer out of step fail loudly instead of dropping data. The notifier
// keeps the body as it came, in a Postgres jsonb column, and decodes it again later, so what
// encoding/json's first version lets through would matter here: it replaces invalid UTF-8
// (which Postgres refuses) instead of failing, takes "SEQ" for "seq" and keeps the last of
// repeated keys (jsonb keeps another one). Its second version refuses all of these, and
// trailing data, by default: one pass over the body, where the first version needed a second
// one over the keys (about half of the notifier's decoding time, which it pays twice per SMS).
func Decode(body []byte) (Event, error) {
	if !utf8.Valid(body) {
		return Event{}, errors.New("walletevent: body is not valid UTF-8")
	}
	var e Event
	if err := jsonv2.Unmarshal(body, &e, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Event{}, decodeError(err)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// decodeError says what Unmarshal refused in the words of the request decoder: an unknown
// field or one given twice by name, the rest as the parser puts it.
func decodeError(err error) error {
	var sem *jsonv2.SemanticError
	if errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName) {
		return fmt.Errorf("walletevent: unknown field %q", sem.JSONPointer.LastToken())
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName) {
		return fmt.Errorf("walletevent: field %q appears twice", syn.JSONPointer.LastToken())
	}
	return fmt.Errorf("walletevent: decode: %w", err)
}
