package walletevent_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/jsonkeys"
	"github.com/walletsaga/walletsaga/internal/testutil/eventschema"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

var kinds = walletevent.Kinds()

// event is a valid event of kind k as the outbox relay writes it.
func event(k walletevent.Kind) walletevent.Event {
	amount := int64(10000)
	switch k {
	case walletevent.Purchase, walletevent.TransferOut:
		amount = -5000
	}
	return walletevent.Event{
		V: walletevent.Version, EventID: 41, UserID: 7, Seq: 3, Kind: k, Amount: amount, Currency: "CNY",
		BalanceAfter: 15000, SagaID: 12, Phone: "+8613800001234", Locale: "zh-CN",
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Epoch: 1767225600000000, EpochSince: 1,
	}
}

func encode(t testing.TB, e walletevent.Event) []byte {
	t.Helper()
	b, err := walletevent.Encode(e)
	require.NoError(t, err)
	return b
}

// fields returns e's body as a map, so a test can break one field at a time.
func fields(t testing.TB, e walletevent.Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(encode(t, e), &m))
	return m
}

func with(t testing.TB, key string, v any) []byte {
	t.Helper()
	m := fields(t, event(walletevent.Deposit))
	if v == nil {
		m[key] = nil
	} else if s, ok := v.(json.RawMessage); ok && s == nil {
		delete(m, key)
	} else {
		m[key] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// malformed are bodies the notifier must dead-letter: each is rejected by Decode.
func malformed(t testing.TB) map[string][]byte {
	valid := encode(t, event(walletevent.Deposit))
	deleted := json.RawMessage(nil)
	return map[string][]byte{
		"empty":                {},
		"blank":                []byte(" \n\t"),
		"null":                 []byte("null"),
		"array":                []byte(`[` + string(valid) + `]`),
		"string":               []byte(`"deposit"`),
		"number":               []byte(`42`),
		"truncated half":       valid[:len(valid)/2],
		"truncated last byte":  valid[:len(valid)-1],
		"two events":           append(append([]byte{}, valid...), valid...),
		"trailing brace":       append(append([]byte{}, valid...), '}'),
		"trailing bracket":     append(append([]byte{}, valid...), ']'),
		"trailing junk":        append(append([]byte{}, valid...), " x"...),
		"version 3":            with(t, "v", 3),
		"version 1 with epoch": with(t, "v", 1),
		"version 0":            with(t, "v", 0),
		"version missing":      with(t, "v", deleted),
		"version null":         with(t, "v", nil),
		"version string":       with(t, "v", "1"),
		"version fraction":     with(t, "v", 1.5),
		"unknown kind":         with(t, "kind", "bonus"),
		"kind upper case":      with(t, "kind", "DEPOSIT"),
		"kind null":            with(t, "kind", nil),
		"kind number":          with(t, "kind", 1),
		"currency lower case":  with(t, "currency", "cny"),
		"currency short":       with(t, "currency", "CN"),
		"currency long":        with(t, "currency", "CNYY"),
		"currency 3 bytes":     with(t, "currency", "€"),
		"currency NUL":         with(t, "currency", "C\x00Y"),
		"currency digits":      with(t, "currency", "123"),
		"negative balance":     with(t, "balance_after", -1),
		"min balance":          with(t, "balance_after", json.Number("-9223372036854775808")),
		"user zero":            with(t, "user_id", 0),
		"user negative":        with(t, "user_id", -7),
		"user string":          with(t, "user_id", "7"),
		"user huge":            with(t, "user_id", json.Number("9223372036854775808")),
		"user exponent":        with(t, "user_id", json.Number("7e0")),
		"user null":            with(t, "user_id", nil),
		"seq zero":             with(t, "seq", 0),
		"seq huge":             with(t, "seq", json.Number("1e400")),
		"seq bool":             with(t, "seq", true),
		"amount fraction":      with(t, "amount", 100.5),
		"amount too small":     with(t, "amount", json.Number("-9223372036854775809")),
		"amount object":        with(t, "amount", map[string]any{"value": 1}),
		"phone missing":        with(t, "phone", deleted),
		"phone null":           with(t, "phone", nil),
		"phone not E.164":      with(t, "phone", "13800001234"),
		"phone letters":        with(t, "phone", "+86138oooo1234"),
		"phone NUL":            with(t, "phone", "+86138\x0000001234"),
		"phone too long":       with(t, "phone", "+"+strings.Repeat("1", 16)),
		"locale NUL":           with(t, "locale", "en\x00"),
		"locale junk":          with(t, "locale", "<script>"),
		"locale long":          with(t, "locale", strings.Repeat("a", 100)),
		"epoch zero":           with(t, "epoch", 0),
		"epoch missing":        with(t, "epoch", deleted),
		"epoch beyond 2^53":    with(t, "epoch", json.Number("9007199254740992")),
		"epoch_since zero":     with(t, "epoch_since", 0),
		"epoch_since past seq": with(t, "epoch_since", 4),
		"occurred_at number":   with(t, "occurred_at", 1767322445),
		"occurred_at not RFC":  with(t, "occurred_at", "2026-01-02 03:04:05"),
		"unknown field":        with(t, "extra", 1),
		"nested junk":          with(t, "extra", map[string]any{"a": []any{[]any{map[string]any{}}, nil, true}}),
		"deep nesting":         []byte(`{"v":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`),
		"invalid UTF-8 phone":  bytes.Replace(valid, []byte("+8613800001234"), []byte("+86138\xff\xfe01234"), 1),
		"invalid UTF-8 locale": bytes.Replace(valid, []byte(`"zh-CN"`), []byte("\"zh-\xc3\x28\""), 1),
		"byte order mark":      append([]byte("\xef\xbb\xbf"), valid...),
		"lone surrogate":       bytes.Replace(valid, []byte(`"zh-CN"`), []byte(`"zh-\ud800"`), 1),
		"escaped NUL":          bytes.Replace(valid, []byte(`"zh-CN"`), []byte(`"zh-\u0000"`), 1),
		"object key NUL":       bytes.Replace(valid, []byte(`"locale"`), []byte(`"locale\u0000"`), 1),
		"key upper case":       bytes.Replace(valid, []byte(`"seq"`), []byte(`"SEQ"`), 1),
		"key case-folded":      bytes.Replace(valid, []byte(`"seq"`), []byte(`"\u017feq"`), 1),
		"key repeated":         bytes.Replace(valid, []byte(`"seq":3`), []byte(`"seq":3,"seq":4`), 1),
		"key repeated in case": bytes.Replace(valid, []byte(`"seq":3`), []byte(`"seq":3,"Seq":4`), 1),
	}
}

// Kinds is the one list of kinds: each once, each a word a SQL CHECK, a message tag and an
// OpenAPI enum take as it is, each Valid; a kind not in it is not.
func TestKindsIsTheListOfValidKinds(t *testing.T) {
	t.Parallel()
	require.NotEmpty(t, kinds)
	seen := map[walletevent.Kind]bool{}
	for _, k := range kinds {
		require.False(t, seen[k], "%q twice", k)
		seen[k] = true
		require.Regexp(t, `^[a-z][a-z_]*[a-z]$`, string(k))
		require.True(t, k.Valid(), "%q", k)
	}
	require.False(t, walletevent.Kind("gift").Valid())
	require.False(t, walletevent.Kind("").Valid())
	got := walletevent.Kinds()
	got[0] = "gift"
	require.Equal(t, kinds, walletevent.Kinds(), "Kinds returns a copy")
}

func TestDecodeAcceptsWhatEncodeWrites(t *testing.T) {
	t.Parallel()
	for _, k := range kinds {
		for _, locale := range []string{"zh-CN", "en", ""} {
			e := event(k)
			e.Locale = locale
			got, err := walletevent.Decode(encode(t, e))
			require.NoError(t, err, "%s %q", k, locale)
			requireSame(t, e, got)
		}
	}
}

// TestDecodeReadsAnEscapedCharacterAsItself: "\u005a" is the JSON string "Z", so a time
// written with it is the same time (Go's time.Time reads the JSON string since go1.27; before,
// it read the raw text and refused the escape, which this test once took for a rule).
func TestDecodeReadsAnEscapedCharacterAsItself(t *testing.T) {
	t.Parallel()
	e := event(walletevent.Deposit)
	body := encode(t, e)
	escaped := bytes.Replace(body, []byte(`Z"`), []byte(`\u005a"`), 1)
	require.NotEqual(t, body, escaped)
	got, err := walletevent.Decode(escaped)
	require.NoError(t, err)
	requireSame(t, e, got)
}

func TestDecodeRejectsMalformedBodies(t *testing.T) {
	t.Parallel()
	for name, body := range malformed(t) {
		_, err := walletevent.Decode(body)
		if err == nil {
			t.Errorf("accepted %s", name)
		}
	}
}

func TestEncodeRejectsAnInvalidEvent(t *testing.T) {
	t.Parallel()
	e := event(walletevent.Deposit)
	e.Currency = "cny"
	_, err := walletevent.Encode(e)
	require.ErrorContains(t, err, "currency")
	e = event(walletevent.Deposit)
	e.BalanceAfter = math.MinInt64
	_, err = walletevent.Encode(e)
	require.ErrorContains(t, err, "balance_after")
	e = event(walletevent.Deposit)
	e.Phone = "13800001234"
	_, err = walletevent.Encode(e)
	require.ErrorContains(t, err, "E.164")
	require.NotContains(t, err.Error(), e.Phone, "a phone number is not logged")
}

// FuzzDecode: Decode never panics; what it accepts is one JSON value in valid UTF-8 that
// passes Validate and survives Encode → Decode unchanged, and its encoding is a payload the
// topic's AsyncAPI document allows.
func FuzzDecode(f *testing.F) {
	contract := eventschema.Load(f, asyncAPI)
	for _, k := range kinds {
		f.Add(encode(f, event(k)))
	}
	e := event(walletevent.TransferIn)
	e.Locale, e.Amount, e.BalanceAfter, e.UserID, e.Seq = "en", math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64
	f.Add(encode(f, e))
	pretty, err := json.MarshalIndent(event(walletevent.Refund), "", "  ")
	require.NoError(f, err)
	f.Add(pretty)
	bad := malformed(f)
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		f.Add(bad[name])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := walletevent.Decode(body)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, e.Validate())
		require.True(t, json.Valid(body), "accepted a body that is not one JSON value: %q", body)
		require.True(t, utf8.Valid(body), "accepted a body that is not UTF-8: %q", body)
		seen := map[string]bool{}
		for _, k := range objectKeys(t, body) {
			require.Contains(t, []string{"v", "event_id", "user_id", "seq", "kind", "amount", "currency", "balance_after",
				"saga_id", "phone", "locale", "occurred_at", "epoch", "epoch_since"}, k, "accepted an unknown key in %q", body)
			require.False(t, seen[k], "accepted the key %q twice in %q", k, body)
			seen[k] = true
		}
		enc, err := walletevent.Encode(e)
		require.NoError(t, err, "accepted %q", body)
		require.NoError(t, contract.ValidateBody(enc), "the encoding of %q breaks the AsyncAPI document", body)
		back, err := walletevent.Decode(enc)
		require.NoError(t, err, "its encoding %q", enc)
		requireSame(t, e, back)
	})
}

// objectKeys returns the keys of the JSON object body, in order, repeats included.
func objectKeys(t *testing.T, body []byte) []string {
	t.Helper()
	keys, err := jsonkeys.Keys(body)
	require.NoError(t, err, "not an object: %q", body)
	return keys
}

// requireSame compares events field by field; the time by instant and offset, since a
// decoded time's *Location is a fresh value.
func requireSame(t *testing.T, want, got walletevent.Event) {
	t.Helper()
	require.True(t, want.OccurredAt.Equal(got.OccurredAt), "occurred_at %s != %s", want.OccurredAt, got.OccurredAt)
	_, wantOff := want.OccurredAt.Zone()
	_, gotOff := got.OccurredAt.Zone()
	require.Equal(t, wantOff, gotOff, "occurred_at offset")
	want.OccurredAt, got.OccurredAt = time.Time{}, time.Time{}
	require.Equal(t, want, got)
}

// TestDecodeNamesTheFieldItRefuses: a bad message's recorded reason says which key was
// unknown, given twice or in another case, as the request decoder says it.
func TestDecodeNamesTheFieldItRefuses(t *testing.T) {
	t.Parallel()
	valid := encode(t, event(walletevent.Deposit))
	for body, want := range map[string]string{
		string(with(t, "extra", 1)):                                         `walletevent: unknown field "extra"`,
		string(bytes.Replace(valid, []byte(`"seq":`), []byte(`"SEQ":`), 1)): `walletevent: unknown field "SEQ"`,
		string(bytes.Replace(valid, []byte(`{`), []byte(`{"seq":1,`), 1)):   `walletevent: field "seq" appears twice`,
		"{\"v\":1,\"phone\":\"+86\xff\"}":                                   "walletevent: body is not valid UTF-8",
	} {
		_, err := walletevent.Decode([]byte(body))
		require.EqualError(t, err, want, "%q", body)
	}
}

// BenchmarkDecode: the notifier decodes every message twice (on arrival, and from its
// inbox before the send).
func BenchmarkDecode(b *testing.B) {
	body := encode(b, event(walletevent.Deposit))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := walletevent.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAnEventWithoutAnEpochIsVersion1: an outbox row from before the wallet had epochs is
// encoded as the previous version's body, without the epoch fields, which a notifier of the
// previous release reads; this one reads it back with epoch 0 ("not said"). A version 1 body
// with an epoch is refused.
func TestAnEventWithoutAnEpochIsVersion1(t *testing.T) {
	t.Parallel()
	e := event(walletevent.Deposit)
	e.Epoch, e.EpochSince = 0, 0
	body := encode(t, e)
	require.NotContains(t, string(body), "epoch")
	got, err := walletevent.Decode(body)
	require.NoError(t, err)
	require.Equal(t, 1, got.V)
	require.Zero(t, got.Epoch)
	require.Zero(t, got.EpochSince)

	m := fields(t, e)
	m["epoch"] = 1767225600000000
	withEpoch, err := json.Marshal(m)
	require.NoError(t, err)
	_, err = walletevent.Decode(withEpoch)
	require.ErrorContains(t, err, "version 1 body has no epoch")

	e = event(walletevent.Deposit)
	got, err = walletevent.Decode(encode(t, e))
	require.NoError(t, err)
	require.Equal(t, walletevent.Version, got.V)
	require.Equal(t, e.Epoch, got.Epoch)
	require.Equal(t, e.EpochSince, got.EpochSince)
}
