package redact_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/redact"
)

func TestPhone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"+8613800001234", "+*********1234"},
		{"+1 (555) 010-0000", "+* (***) ***-0000"},
		{"1234", "1234"},
		{"", ""},
	} {
		require.Equal(t, tc.want, redact.Phone(tc.in))
	}
}

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://sms.example.com/v1/send", "https://sms.example.com/v1/send"},
		{"https://acct:s3cret@sms.example.com:8443/v1/send?api_key=k3y&x=1#frag", "https://sms.example.com:8443/v1/send"},
		{"http://user@127.0.0.1:8082", "http://127.0.0.1:8082"},
		{"http://127.0.0.1:8082/?", "http://127.0.0.1:8082/"},
		{"::", "(unparseable URL)"},
	} {
		require.Equal(t, tc.want, redact.URL(tc.in), tc.in)
	}
}

// The HTTP client's error names the URL it called: URLError leaves its host and path, and
// takes out the user, the password and the query.
func TestURLError(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://acct:s3cret@127.0.0.1:1/sms?api_key=k3y", nil)
	require.NoError(t, err)
	_, err = (&http.Client{}).Do(req) //nolint:bodyclose // no response: nothing listens on port 1
	require.Error(t, err)
	err = fmt.Errorf("webhook: %w", redact.URLError(err))
	require.Contains(t, err.Error(), "http://127.0.0.1:1/sms")
	for _, secret := range []string{"acct", "s3cret", "api_key", "k3y"} {
		require.NotContains(t, err.Error(), secret)
	}
	var ue *url.Error
	require.ErrorAs(t, err, &ue, "still the client's error")
	plain := errors.New("no URL here")
	require.Equal(t, plain, redact.URLError(plain))
}

func TestURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		// The console's phone search, as the browser encodes it, and as people type it.
		{"/v1/users?phone=%2B8613800001234&limit=20", "/v1/users?phone=+*********1234&limit=20"},
		{"/v1/users?phone=+8613800001234", "/v1/users?phone= *********1234"},
		{"/v1/users?limit=5&Phone=%2B86%20138%200000%201234", "/v1/users?limit=5&Phone=+** *** **** 1234"},
		{"/v1/users?mobile_no=13800001234", "/v1/users?mobile_no=*******1234"},
		// An international number under any name, or as a path segment.
		{"/v1/x?q=%2B8613800001234", "/v1/x?q=+*********1234"},
		{"/v1/users/+8613800001234/sms", "/v1/users/+*********1234/sms"},
		{"/v1/users/%2B8613800001234/sms", "/v1/users/+*********1234/sms"},
		// A value that does not decode: its digits are masked as they came.
		{"/v1/users?phone=%zz8613800001234", "/v1/users?phone=%zz*********1234"},
		// Ids, limits and cursors are kept.
		{"/v1/users/12345678/sms?limit=50&cursor=1700000000000000.5.3.0A1B", "/v1/users/12345678/sms?limit=50&cursor=1700000000000000.5.3.0A1B"},
		{"/v1/sagas?user_id=123456789&state=completed", "/v1/sagas?user_id=123456789&state=completed"},
		{"/v1/x?q=%2B12", "/v1/x?q=%2B12"},
		{"/healthz", "/healthz"},
	} {
		require.Equal(t, tc.want, redact.URI(tc.in), tc.in)
	}
}
