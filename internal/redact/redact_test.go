package redact_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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
		{"", ""},
		// An HTTP URL: its userinfo left out, each secret parameter's value masked, everything
		// else kept as it was written, in its order.
		{"https://acct:s3cret@sms.example.com:8443/v1/send?api_key=k3y&x=1#frag", "https://sms.example.com:8443/v1/send?api_key=xxxxx&x=1#frag"},
		{"http://user@127.0.0.1:8082", "http://127.0.0.1:8082"},
		{"http://127.0.0.1:8082/?", "http://127.0.0.1:8082/?"},
		{"https://h/p?Token=a&X-Amz-Signature=b&apiKey=c&client_secret=d&sig=e&Access_Token=f&X-Amz-Credential=g",
			"https://h/p?Token=xxxxx&X-Amz-Signature=xxxxx&apiKey=xxxxx&client_secret=xxxxx&sig=xxxxx&Access_Token=xxxxx&X-Amz-Credential=xxxxx"},
		{"https://h/p?code=a&auth=b&KEY=c&accesstoken=d&AWSAccessKeyId=e&Authorization=f&pwd=g&passphrase=h",
			"https://h/p?code=xxxxx&auth=xxxxx&KEY=xxxxx&accesstoken=xxxxx&AWSAccessKeyId=xxxxx&Authorization=xxxxx&pwd=xxxxx&passphrase=xxxxx"},
		{"https://h/p?region=eu&page=2&q=a%20b&flag&author=me&monkey=1", "https://h/p?region=eu&page=2&q=a%20b&flag&author=me&monkey=1"},
		{"https://h/cb#access_token=t0k&state=s", "https://h/cb#access_token=xxxxx&state=s"},
		{"https://host/x?email=a@b.com", "https://host/x?email=a@b.com"},
		{"https://u:p/ss@host/x?token=t", "https://xxxxx@host/x?token=xxxxx"},
		{"https://u:@p#ss@host/x", "https://xxxxx@host/x"},
		{"postgres://u:@p#ss@host/db", "postgres://u:xxxxx@host/db"},
		// A database URL: the user, host list, database and parameters kept, the password
		// masked wherever it is.
		{"postgres://walletsaga:s3cret@db.internal:5432/wallet?sslmode=verify-full&password=s3cret2&SSLPassword=s3cret3",
			"postgres://walletsaga:xxxxx@db.internal:5432/wallet?sslmode=verify-full&password=xxxxx&SSLPassword=xxxxx"},
		{"postgresql://u:pw@node1:5432,[::1]:5433/db?target_session_attrs=read-write", "postgresql://u:xxxxx@node1:5432,[::1]:5433/db?target_session_attrs=read-write"},
		{"postgres://u@h/db?pass%77ord=s3cret", "postgres://u@h/db?pass%77ord=xxxxx"},
		{"postgres://u@h/db?sslkey=/k.pem&sslcert=/c.pem&keepalives=1&passfile=/p&application_name=wallet&password=",
			"postgres://u@h/db?sslkey=/k.pem&sslcert=/c.pem&keepalives=1&passfile=/p&application_name=wallet&password="},
		// A password written without its escapes: whatever it ends in, it is masked.
		{"postgres://u:pa/ss@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://u:p?ss@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://u:p#ss@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://u:p@ss@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://u:12/34@host/db", "postgres://u:xxxxx@host/db"},
		{"postgres://:pa/ss@host/db", "postgres://:xxxxx@host/db"},
		// Or an '@' in a parameter of a database URL without a user: masked up to it, and
		// what follows read for parameters too.
		{"postgres://h/db?password=s3cret&application_name=a@b", "postgres://xxxxx@b"},
		{"postgres://h/db?application_name=a@b&password=s3cret", "postgres://xxxxx@b&password=xxxxx"},
		// A keyword/value connection string, as pgx takes it too.
		{"host=db.internal port=5432 user=walletsaga password=s3cret dbname=wallet sslmode=require",
			"host=db.internal port=5432 user=walletsaga password=xxxxx dbname=wallet sslmode=require"},
		{`  host=db password = 's3 cr\'et'  sslpassword=x\ y sslmode=verify-full`, `  host=db password = xxxxx  sslpassword=xxxxx sslmode=verify-full`},
		{"host=db password='unterminated", "host=db password=xxxxx"},
		{"host=db pass word=s3cret", "host=db xxxxx"},
		// No scheme: a relative reference (a Location header), or a URL missing its scheme.
		{"/v1/next?token=abc&x=1", "/v1/next?token=xxxxx&x=1"},
		{"walletsaga:s3cret@db/wallet", "xxxxx@db/wallet"},
		{"/x?email=a@b&token=t", "xxxxx@b&token=xxxxx"},
		{"::", "::"},
	} {
		require.Equal(t, tc.want, redact.URL(tc.in), tc.in)
	}
}

// Whatever a password holds, written with its escapes or not, URL shows none of it: in a
// database URL's user part, as a parameter, in a keyword/value string, as a provider's key.
func FuzzURLHidesAPassword(f *testing.F) {
	for _, pw := range []string{"s3cret-password", "pa/ss?wo#rd@x", "p@ss:w0rd/", "a&password=b", "'quoted' \\ back", "with space s"} {
		f.Add(pw)
	}
	kv := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	forms := []func(pw string) string{
		func(pw string) string { return "postgres://u:" + pw + "@h:5432/db?sslmode=disable" },
		func(pw string) string { return "postgres://u:" + url.PathEscape(pw) + "@h:5432/db?sslmode=disable" },
		func(pw string) string {
			return "postgres://u@h:5432/db?sslmode=disable&password=" + url.QueryEscape(pw)
		},
		func(pw string) string { return "host=h port=5432 password='" + kv.Replace(pw) + "' sslmode=disable" },
		func(pw string) string {
			return "https://sms.example.com/send?api_key=" + url.QueryEscape(pw) + "&region=eu"
		},
		func(pw string) string { return "https://" + url.PathEscape(pw) + "@sms.example.com/send" },
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 8 || strings.ContainsAny(pw, "\x00\n") {
			return // too short to tell from the rest of the URL
		}
		for _, form := range forms {
			if strings.Contains(form(redact.Mask), pw) {
				continue // it is part of the URL around it
			}
			if raw := form(pw); strings.Contains(redact.URL(raw), pw) {
				t.Fatalf("URL(%q) = %q shows the password", raw, redact.URL(raw))
			}
		}
	})
}

// The HTTP client's error names the URL it called: URLError leaves its host, path and
// parameters, and takes out the user, the password and the key.
func TestURLError(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://acct:s3cret@127.0.0.1:1/sms?api_key=k3y", nil)
	require.NoError(t, err)
	_, err = (&http.Client{}).Do(req) //nolint:bodyclose // no response: nothing listens on port 1
	require.Error(t, err)
	err = fmt.Errorf("webhook: %w", redact.URLError(err))
	require.Contains(t, err.Error(), "http://127.0.0.1:1/sms?api_key=xxxxx")
	for _, secret := range []string{"acct", "s3cret", "k3y"} {
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
