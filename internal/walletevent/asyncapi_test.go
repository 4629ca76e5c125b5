package walletevent_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/jsonkeys"
	"github.com/walletsaga/walletsaga/internal/testutil/eventschema"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// asyncAPI is the topic's contract, next to the encoder it describes.
const asyncAPI = "asyncapi.yaml"

// strings of a list in the document.
func stringsOf(t *testing.T, v any) []string {
	t.Helper()
	l, ok := v.([]any)
	require.True(t, ok, "%v is not a list", v)
	out := make([]string, len(l))
	for i, x := range l {
		out[i], ok = x.(string)
		require.True(t, ok, "%v is not a string", x)
	}
	return out
}

// TestTheAsyncAPIDocumentIsTheEncoders: the document's payload schema names exactly the
// fields the encoder writes, all required, at the version it writes; both lists of kinds (the
// payload's and the tag's) are walletevent's, in its order; and the document is AsyncAPI 3
// with the topic and the operations the services perform.
func TestTheAsyncAPIDocumentIsTheEncoders(t *testing.T) {
	t.Parallel()
	c := eventschema.Load(t, asyncAPI)
	require.Equal(t, "3.0.0", c.At(t, "asyncapi"))
	require.Equal(t, "wallet-events", c.At(t, "channels", "walletEvents", "address"))
	require.Equal(t, "send", c.At(t, "operations", "publishBalanceChanges", "action"))
	require.Equal(t, "receive", c.At(t, "operations", "consumeBalanceChanges", "action"))

	schema := []string{"components", "schemas", "walletEventV2"}
	fields := slices.Collect(maps.Keys(jsonkeys.FieldNames(reflect.TypeFor[walletevent.Event]())))
	props, ok := c.At(t, append(schema, "properties")...).(map[string]any)
	require.True(t, ok)
	require.ElementsMatch(t, fields, slices.Collect(maps.Keys(props)), "the schema's fields are the event's")
	require.ElementsMatch(t, fields, stringsOf(t, c.At(t, append(schema, "required")...)), "every field is required")
	require.Equal(t, false, c.At(t, append(schema, "additionalProperties")...))
	require.Equal(t, walletevent.Version, c.At(t, append(schema, "properties", "v", "const")...))

	kinds := make([]string, len(walletevent.Kinds()))
	for i, k := range walletevent.Kinds() {
		kinds[i] = string(k)
	}
	require.Equal(t, kinds, stringsOf(t, c.At(t, append(schema, "properties", "kind", "enum")...)), "the payload's kinds")
	require.Equal(t, kinds, stringsOf(t, c.At(t, "components", "schemas", "properties", "properties", "TAGS", "enum")), "the tag's kinds")
}

// TestWhatTheEncoderWritesFollowsTheDocument: every kind, every locale shape and the largest
// numbers the encoder writes are valid payloads, and the document's own example is one
// the decoder accepts.
func TestWhatTheEncoderWritesFollowsTheDocument(t *testing.T) {
	t.Parallel()
	c := eventschema.Load(t, asyncAPI)
	for _, k := range kinds {
		for _, locale := range []string{"zh-CN", "en", ""} {
			e := event(k)
			e.Locale = locale
			require.NoError(t, c.ValidateBody(encode(t, e)), "%s %q", k, locale)
		}
	}
	big := event(walletevent.TransferIn)
	big.EventID, big.UserID, big.Seq, big.Amount, big.BalanceAfter, big.SagaID = 1<<63-1, 1<<63-1, 1<<63-1, -1<<63, 1<<63-1, 1<<63-1
	require.NoError(t, c.ValidateBody(encode(t, big)))

	examples, ok := c.At(t, "components", "messages", "balanceChanged", "examples").([]any)
	require.True(t, ok)
	require.NotEmpty(t, examples)
	for _, ex := range examples {
		m, ok := ex.(map[string]any)
		require.True(t, ok)
		body, err := json.Marshal(m["payload"])
		require.NoError(t, err)
		require.NoError(t, c.ValidateBody(body))
		_, err = walletevent.Decode(body)
		require.NoError(t, err, "the example is an event the notifier takes: %s", body)
		headers := map[string]string{}
		h, ok := m["headers"].(map[string]any)
		require.True(t, ok)
		for k, v := range h {
			headers[k], ok = v.(string)
			require.True(t, ok, "property %s", k)
		}
		require.NoError(t, c.ValidateProperties(headers))
	}
}

// TestTheDocumentRequiresNoProperty: the notifier takes an event from its body alone, so the
// headers schema requires no property: a message with none (what the Java client's orderly
// send publishes) follows it, as do the broker's own properties; a property walletsvc sets
// is still held to its shape when present.
func TestTheDocumentRequiresNoProperty(t *testing.T) {
	t.Parallel()
	c := eventschema.Load(t, asyncAPI)
	require.NoError(t, c.ValidateProperties(map[string]string{}))
	require.NoError(t, c.ValidateProperties(map[string]string{"UNIQ_KEY": "7F00000100002A9F0000000000000001", "WAIT": "true"}))
	require.NoError(t, c.ValidateProperties(map[string]string{"TAGS": "deposit"}))
	require.NoError(t, c.ValidateProperties(map[string]string{"KEYS": "41"}), "keys of the producer's own")
	for name, props := range map[string]map[string]string{
		"a tag that is no kind":        {"TAGS": "balance"},
		"a sharding key not a user id": {"SHARDING_KEY": "user-7"},
		"a malformed traceparent":      {"traceparent": "00-xyz"},
	} {
		require.Error(t, c.ValidateProperties(props), name)
	}
}

// schemaAccepts lists the malformed bodies the payload schema cannot refuse: what makes
// most of them malformed is the JSON text itself, which a JSON Schema never sees (it validates the
// value a parser made of it), and the notifier's decoder refuses them on that text.
var schemaAccepts = map[string]string{
	"user exponent": "7e0 is the integer 7 as a value",
	"key repeated":  "a JSON parser keeps one of the two",
	// And one whose fault is between two fields, which a JSON Schema does not compare.
	"epoch_since past seq": "epoch_since must not exceed seq",
}

// TestTheDocumentRefusesWhatTheDecoderRefuses: each body the notifier's decoder refuses is
// refused by the payload schema too (or is not JSON), but for the few whose fault is in the
// JSON text alone (schemaAccepts, checked to be exactly those).
func TestTheDocumentRefusesWhatTheDecoderRefuses(t *testing.T) {
	t.Parallel()
	c := eventschema.Load(t, asyncAPI)
	var accepted []string
	for name, body := range malformed(t) {
		if err := c.ValidateBody(body); err == nil {
			accepted = append(accepted, name)
		}
	}
	slices.Sort(accepted)
	require.Equal(t, slices.Sorted(maps.Keys(schemaAccepts)), accepted,
		"the schema refuses every malformed body but those whose fault it cannot see")
}
