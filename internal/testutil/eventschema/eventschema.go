// Package eventschema loads the wallet-events topic's AsyncAPI document
// (internal/walletevent/asyncapi.yaml) for the tests that hold the product to it: the
// message's payload schema and properties schema, as the document states them, compiled by
// a JSON Schema validator (santhosh-tekuri/jsonschema; AsyncAPI 3's schemas are JSON Schema
// draft 07), with formats asserted.
package eventschema

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// base is the URL the document is known by while its schemas compile; nothing is fetched.
const base = "https://walletsaga.invalid/asyncapi.yaml"

// The message whose schemas the tests use.
const (
	PayloadLocation = "#/components/messages/balanceChanged/payload"
	HeadersLocation = "#/components/messages/balanceChanged/headers"
)

// Contract is the document and its message's schemas.
type Contract struct {
	// Doc is the document as YAML decodes it.
	Doc map[string]any
	// Payload validates a message body; Headers a message's properties.
	Payload *jsonschema.Schema
	Headers *jsonschema.Schema
}

// Load reads the AsyncAPI document at path and compiles its message's schemas.
func Load(t testing.TB, path string) Contract {
	t.Helper()
	c, err := load(path)
	require.NoError(t, err)
	return c
}

func load(path string) (Contract, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the test names the document
	if err != nil {
		return Contract{}, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return Contract{}, fmt.Errorf("%s: %w", path, err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft7)
	comp.AssertFormat()
	if err := comp.AddResource(base, doc); err != nil {
		return Contract{}, err
	}
	payload, err := comp.Compile(base + PayloadLocation)
	if err != nil {
		return Contract{}, fmt.Errorf("%s: the payload schema: %w", path, err)
	}
	headers, err := comp.Compile(base + HeadersLocation)
	if err != nil {
		return Contract{}, fmt.Errorf("%s: the headers schema: %w", path, err)
	}
	return Contract{Doc: doc, Payload: payload, Headers: headers}, nil
}

// ValidateBody validates a message body against the payload schema. A body that is not
// JSON is an error too.
func (c Contract) ValidateBody(body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return c.Payload.Validate(v)
}

// ValidateProperties validates a message's properties against the headers schema.
func (c Contract) ValidateProperties(props map[string]string) error {
	m := make(map[string]any, len(props))
	for k, v := range props {
		m[k] = v
	}
	return c.Headers.Validate(m)
}

// At returns the value at the path of keys in the document, failing the test when there is
// none.
func (c Contract) At(t testing.TB, keys ...string) any {
	t.Helper()
	var v any = c.Doc
	for i, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v is not a mapping", keys[:i])
		v, ok = m[k]
		require.True(t, ok, "the document has no %v", keys[:i+1])
	}
	return v
}
