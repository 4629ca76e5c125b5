// Package jsonkeys checks what encoding/json lets through at the top level of an object: a
// key matched to a field only when case is ignored ("SEQ" for "seq", even "ſeq"), and a key
// given twice (encoding/json keeps the last, Postgres's jsonb another one). The request
// decoder (httpx) holds its input to it, and so does the event decoder (walletevent) when
// built before go1.27, whose encoding/json/v2 refuses both by itself.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Problem is what is wrong with an object's keys.
type Problem int

// The problems Check reports.
const (
	NotObject Problem = iota + 1 // the value is not an object
	Unknown                      // a key is not one of the known names, spelled exactly
	Repeated                     // a key appears twice
)

// Error is a Problem, with the key (Unknown, Repeated) or the kind of value found (NotObject:
// "null", "bool", "number", "string" or "array").
type Error struct {
	Problem Problem
	Key     string
	Kind    string
}

func (e *Error) Error() string {
	switch e.Problem {
	case NotObject:
		return "not a JSON object but " + e.Kind
	case Unknown:
		return fmt.Sprintf("unknown field %q", e.Key)
	}
	return fmt.Sprintf("field %q appears twice", e.Key)
}

// Keys returns the top-level keys of the JSON object body, in order, repeats included. An
// error is an *Error (NotObject) or encoding/json's syntax error.
func Keys(body []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, &Error{Problem: NotObject, Kind: kind(tok)}
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		keys = append(keys, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Check requires body to be a JSON object whose keys each appear once and, unless known is
// nil, are among known. An error is an *Error or encoding/json's syntax error.
func Check(body []byte, known map[string]bool) error {
	keys, err := Keys(body)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		switch {
		case known != nil && !known[k]:
			return &Error{Problem: Unknown, Key: k}
		case seen[k]:
			return &Error{Problem: Repeated, Key: k}
		}
		seen[k] = true
	}
	return nil
}

func kind(tok json.Token) string {
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

var cache sync.Map // reflect.Type → map[string]bool

// FieldNames returns the JSON names of the fields encoding/json fills in a struct of type t
// (embedded structs' fields included), or nil when t is not a struct or a pointer to one.
func FieldNames(t reflect.Type) map[string]bool {
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if names, ok := cache.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	addFieldNames(t, names)
	cache.Store(t, names)
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
