package jsonkeys_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/jsonkeys"
)

func TestKeysListsTopLevelKeysInOrderWithRepeats(t *testing.T) {
	keys, err := jsonkeys.Keys([]byte(` {"b":1, "a":{"x":[1,{"y":2}]}, "b":"z", "":null} `))
	require.NoError(t, err)
	require.Equal(t, []string{"b", "a", "b", ""}, keys, "nested keys are not top-level ones")
	keys, err = jsonkeys.Keys([]byte(`{}`))
	require.NoError(t, err)
	require.Empty(t, keys)
	for body, kind := range map[string]string{`null`: "null", `true`: "bool", `1.5`: "number", `"s"`: "string", `[{"a":1}]`: "array"} {
		_, err := jsonkeys.Keys([]byte(body))
		var ke *jsonkeys.Error
		require.ErrorAs(t, err, &ke, body)
		require.Equal(t, jsonkeys.NotObject, ke.Problem, body)
		require.Equal(t, kind, ke.Kind, body)
	}
	_, err = jsonkeys.Keys([]byte(`{"a":`))
	require.Error(t, err)
	var syn *json.SyntaxError
	_, err = jsonkeys.Keys([]byte(`{"a" 1}`))
	require.ErrorAs(t, err, &syn)
}

type inner struct {
	Deep int `json:"deep"`
}

type request struct {
	inner
	Name    string `json:"name,omitempty"`
	Plain   int
	Skipped int `json:"-"`
	hidden  int //nolint:unused // an unexported field, which FieldNames must leave out
}

func TestCheckRefusesUnknownAndRepeatedKeys(t *testing.T) {
	known := jsonkeys.FieldNames(reflect.TypeFor[*request]())
	require.Equal(t, map[string]bool{"deep": true, "name": true, "Plain": true}, known)
	require.Nil(t, jsonkeys.FieldNames(reflect.TypeFor[map[string]int]()))
	require.NoError(t, jsonkeys.Check([]byte(`{"name":"a","deep":1,"Plain":2}`), known))
	for body, want := range map[string]jsonkeys.Error{
		`{"NAME":"a"}`:            {Problem: jsonkeys.Unknown, Key: "NAME"},
		`{"ſkipped":1}`:           {Problem: jsonkeys.Unknown, Key: "ſkipped"},
		`{"Skipped":1}`:           {Problem: jsonkeys.Unknown, Key: "Skipped"},
		`{"name":"a","name":"b"}`: {Problem: jsonkeys.Repeated, Key: "name"},
		`null`:                    {Problem: jsonkeys.NotObject, Kind: "null"},
	} {
		err := jsonkeys.Check([]byte(body), known)
		var ke *jsonkeys.Error
		require.ErrorAs(t, err, &ke, body)
		require.Equal(t, want, *ke, body)
	}
	require.NoError(t, jsonkeys.Check([]byte(`{"anything":1}`), nil), "nil known: any key, once")
	require.Error(t, jsonkeys.Check([]byte(`{"x":1,"x":2}`), nil))
	require.EqualError(t, jsonkeys.Check([]byte(`{"x":1,"x":2}`), nil), `field "x" appears twice`)
}
