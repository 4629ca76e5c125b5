package httpx_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/httpx"
	"github.com/walletsaga/walletsaga/internal/jsonkeys"
)

// request has the shapes of the services' request bodies: text, an amount kept raw for
// its own parser, an integer, and the reason of an operator action.
type request struct {
	Name   string          `json:"name"`
	Amount json.RawMessage `json:"amount"`
	Seq    int64           `json:"seq"`
	Reason string          `json:"reason"`
}

var requestFields = map[string]bool{"name": true, "amount": true, "seq": true, "reason": true}

// fuzzBodyLimit is the body limit "1K" of decodeServer: echo counts K as 1000 bytes.
const fuzzBodyLimit = 1000

// decoded is what the handler saw.
type decoded struct {
	called bool
	req    request
	err    error
}

// decodeServer serves POST /decode through httpx.New's middleware and error handler; the
// handler decodes the body strictly and reports what DecodeJSON returned.
func decodeServer() (*echo.Echo, *decoded) {
	got := &decoded{}
	e := httpx.New(httpx.Options{Logger: slog.New(slog.DiscardHandler), BodyLimit: "1K"})
	e.POST("/decode", func(c echo.Context) error {
		got.called = true
		got.err = httpx.DecodeJSON(c, &got.req)
		if got.err != nil {
			return got.err
		}
		return c.NoContent(http.StatusNoContent)
	})
	return e, got
}

func TestDecodeJSONRefusesWhatEncodingJSONLetsThrough(t *testing.T) {
	t.Parallel()
	e, got := decodeServer()
	for body, want := range map[string]string{
		`null`:                   "request body must be a JSON object, got null",
		`{"NAME":"Alice"}`:       `unknown field "NAME"`,
		"{\"\u017feq\":1}":       "unknown field \"\u017feq\"",
		`{"seq":1,"seq":2}`:      `field "seq" appears twice`,
		"{\"name\":\"Jos\xe9\"}": "request body must be UTF-8",
		`{"name":"Alice"}]`:      "request body must hold a single JSON object",
		`{"name":"Alice"}{}`:     "request body must hold a single JSON object",
		`[]`:                     "request body must be a JSON object, got array",
		``:                       "request body is empty",
	} {
		req := httptest.NewRequest(http.MethodPost, "/decode", strings.NewReader(body))
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		rec := httptest.NewRecorder()
		*got = decoded{}
		e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusBadRequest, rec.Code, "%q", body)
		var b apperr.Body
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b))
		require.Equal(t, apperr.Invalid, b.Error.Code)
		require.Equal(t, want, b.Error.Message, "%q", body)
	}
}

// FuzzDecodeJSON: strict request decoding never panics; every rejection is an apperr with a
// 4xx status and a message, answered as such; what it accepts is a single JSON object in
// UTF-8 whose keys are the request's fields, exactly and once each. A reason it accepts,
// CheckReason accepts only as text of at most MaxReasonLen characters without control or
// unassigned characters, U+FFFD or white space at either end.
func FuzzDecodeJSON(f *testing.F) {
	const ct = "application/json"
	for _, s := range []struct{ body, ct string }{
		{`{"name":"Alice","amount":10000,"seq":3,"reason":"provider outage over"}`, ct},
		{`{"amount":"100.00"}`, "application/json; charset=utf-8"},
		{` {"reason":"lost in broker failover, INC-12"} ` + "\n", "Application/JSON"},
		{`{}`, ct},
		{`{"name":"Alice"}`, "text/plain"},
		{`{"name":"Alice"}`, ""},
		{``, ct},
		{`   `, ct},
		{`null`, ct},
		{`[]`, ct},
		{`"text"`, ct},
		{`42`, ct},
		{`{"name":"Alice"`, ct},
		{`{"name":"Alice"}{}`, ct},
		{`{"name":"Alice"} x`, ct},
		{`{"name":"Alice"}]`, ct},
		{`{"nickname":"Al"}`, ct},
		{`{"NAME":"Alice"}`, ct},
		{`{"seq":1,"seq":2}`, ct},
		{`{"seq":"1"}`, ct},
		{`{"seq":1.5}`, ct},
		{`{"seq":1e400}`, ct},
		{`{"seq":9223372036854775808}`, ct},
		{`{"seq":null,"name":null,"amount":null}`, ct},
		{`{"name":{"first":"A"}}`, ct},
		{`{"amount":[[[[[[{}]]]]]]}`, ct},
		{`{"name":"` + strings.Repeat("x", 2*fuzzBodyLimit) + `"}`, ct},
		{"{\"name\":\"Jos\xe9\"}", ct},
		{"\xef\xbb\xbf{\"name\":\"Alice\"}", ct},
		{`{"name":"\ud800"}`, ct},
		{`{"reason":"a\u0000b"}`, ct},
		{"{\"reason\":\"line\\nbreak\"}", ct},
		{`{"reason":"   "}`, ct},
		{`{"reason":"` + strings.Repeat("y", 501) + `"}`, ct},
		{`{"na\u006de":"Alice"}`, ct},
		{"{\"\u017feq\":1}", ct},
	} {
		f.Add([]byte(s.body), s.ct)
	}
	e, got := decodeServer()
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, "/decode", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, contentType)
		rec := httptest.NewRecorder()
		*got = decoded{}
		e.ServeHTTP(rec, req)

		if !got.called {
			// The body limit answered before the handler ran.
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "%s", rec.Body)
			require.Greater(t, len(body), fuzzBodyLimit)
			return
		}
		if got.err != nil {
			var ae *apperr.Error
			require.True(t, errors.As(got.err, &ae), "not an apperr: %#v", got.err)
			status := apperr.Status(ae.Code)
			require.True(t, status >= 400 && status < 500, "status %d for %q", status, body)
			require.NotEmpty(t, ae.Message)
			require.True(t, utf8.ValidString(ae.Message), "message %q", ae.Message)
			require.Equal(t, status, rec.Code, "the answer's status")
			var b apperr.Body
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b))
			require.Equal(t, ae.Code, b.Error.Code)
			require.Equal(t, ae.Message, b.Error.Message)
			return
		}
		require.Equal(t, http.StatusNoContent, rec.Code, "%s", rec.Body)
		require.LessOrEqual(t, len(body), fuzzBodyLimit)
		require.True(t, utf8.Valid(body), "accepted a body that is not UTF-8: %q", body)
		require.True(t, json.Valid(body), "accepted a body that is not one JSON value: %q", body)
		require.Equal(t, byte('{'), bytes.TrimLeft(body, " \t\r\n")[0], "accepted a body that is not an object: %q", body)
		seen := map[string]bool{}
		for _, k := range topLevelKeys(t, body) {
			require.True(t, requestFields[k], "accepted the unknown field %q in %q", k, body)
			require.False(t, seen[k], "accepted the field %q twice in %q", k, body)
			seen[k] = true
		}

		reason := got.req.Reason
		if err := httpx.CheckReason(reason); err != nil {
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			return
		}
		require.NotEmpty(t, reason)
		require.LessOrEqual(t, utf8.RuneCountInString(reason), httpx.MaxReasonLen)
		require.Equal(t, strings.TrimSpace(reason), reason)
		require.True(t, utf8.ValidString(reason))
		for _, r := range reason {
			// Written apart from internal/freetext, so that the two can disagree: assigned
			// means graphic, a line or paragraph separator, or a format or private-use character.
			assigned := unicode.IsGraphic(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Cf, unicode.Co)
			require.True(t, assigned && !unicode.IsControl(r) && r != utf8.RuneError, "accepted the reason %q with U+%04X", reason, r)
		}
	})
}

// topLevelKeys returns the keys of the JSON object body, in order, duplicates included.
func topLevelKeys(t *testing.T, body []byte) []string {
	t.Helper()
	keys, err := jsonkeys.Keys(body)
	require.NoError(t, err)
	return keys
}
